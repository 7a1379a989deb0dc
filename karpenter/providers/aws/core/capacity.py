"""Instance-type capacity and overhead: what a node of a type offers and what the system keeps.

Upstream's formulas: memory less ``VM_MEMORY_OVERHEAD_PERCENT`` (and 64 MiB on arm64),
ENI-limited max pods, ``podsPerCore``, ephemeral storage from the block devices, extended
resources for GPUs and accelerators, plus ``pod-eni`` and Windows' ``PrivateIPv4Address`` from the
static VPC limits table (``vpclimits``); overhead is kube-reserved (CPU tiers, ``11×pods+255Mi``,
1Gi storage) plus system-reserved plus the hard-eviction thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from karpenter.core.model.quantity import MILLI, parse_quantity
from karpenter.providers.aws.core import amifamily, ec2types, vpclimits
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo

MIB = 2**20
GIB = 2**30
DEFAULT_WINDOWS_PODS = 110
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
GAUDI = "habana.ai/gaudi"
NEURON = "aws.amazon.com/neuron"
NEURON_CORE = "aws.amazon.com/neuroncore"
EFA = "vpc.amazonaws.com/efa"
POD_ENI = vpclimits.POD_ENI
PRIVATE_IPV4 = vpclimits.PRIVATE_IPV4  # Windows: secondary IPs of the primary ENI
_GPU_RESOURCES = {"NVIDIA": NVIDIA_GPU, "AMD": AMD_GPU, "Habana": GAUDI}


@dataclass(frozen=True, slots=True)
class Kubelet:
    """The Karpenter-managed subset of ``spec.kubelet`` (quantities as strings).

    With the NodeClassCEL gate, ``max_pods_expression`` and reserved values that are not
    quantities are CEL expressions; ``kubeletexpr`` resolves them per instance type first.
    """

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)
    cluster_dns: tuple[str, ...] = ()
    max_pods_expression: str = ""


@dataclass(frozen=True, slots=True)
class CapacityOptions:
    """Settings and NodeClass fields the capacity math depends on."""

    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0
    ami_family: str = amifamily.AL2023
    kubelet: Kubelet = field(default_factory=Kubelet)
    # Size of the block device the family keeps ephemeral storage on (None: family default).
    ephemeral_volume_bytes: int | None = None
    instance_store_raid0: bool = False
    # spec.networkInterfaces: efa-only interfaces on card 0 (they take ENIs from pods) and in all
    efa_only_card0: int = 0
    efa_only: int | None = None  # None: no networkInterfaces, EFA capacity = the type's maximum
    # the VPC resource controller's static table by type (empty: no pod-eni/PrivateIPv4Address)
    vpc_limits: Mapping[str, vpclimits.VpcLimits] = field(default_factory=dict)
    # NodeClassCEL on: evaluates kubelet expressions (``kubeletexpr`` resolves them per type)
    evaluate: Callable[[str, Mapping[str, int | str]], float] | None = None


def memory_mib(info: InstanceTypeInfo, overhead_percent: float) -> int:
    """Memory capacity in MiB: arm64 loses 64 MiB, then the VM overhead (rounded up)."""
    mib = info.memory_mib
    if info.architectures and info.architectures[0] == "arm64":
        mib -= 64
    return mib - math.ceil(mib * MIB * overhead_percent / MIB)


def eni_limited_pods(info: InstanceTypeInfo, reserved_enis: int, efa_only: int = 0) -> int:
    """``usableENIs × (IPv4 per ENI − 1) + 2``; 0 when no ENI is left."""
    usable = max(info.max_enis - reserved_enis - efa_only, 0)
    if usable == 0:
        return 0
    return usable * (info.ipv4_per_eni - 1) + 2


def pods(info: InstanceTypeInfo, opts: CapacityOptions) -> int:
    """Max pods: kubelet maxPods, else ENI-limited (or 110 on Windows), capped by podsPerCore."""
    feats = amifamily.features(opts.ami_family)
    if opts.kubelet.max_pods is not None:
        count = opts.kubelet.max_pods
    elif feats.eni_limited_pods:
        count = eni_limited_pods(info, opts.reserved_enis, opts.efa_only_card0)
    else:
        count = DEFAULT_WINDOWS_PODS
    ppc = opts.kubelet.pods_per_core
    if ppc and feats.pods_per_core:
        count = min(ppc * info.vcpus, count)
    return count


def ephemeral_storage_bytes(info: InstanceTypeInfo, opts: CapacityOptions) -> int:
    """RAID0 instance store when asked, else the family's ephemeral block device."""
    if opts.instance_store_raid0 and info.instance_storage_gb:
        return info.instance_storage_gb * 10**9
    if opts.ephemeral_volume_bytes is not None:
        return opts.ephemeral_volume_bytes
    return amifamily.features(opts.ami_family).default_volume_gib * GIB


def extended(info: InstanceTypeInfo, efa_only: int | None = None) -> dict[str, int]:
    """GPU, Neuron and EFA resources (whole units); EFA: spec's efa-only count if given."""
    out: dict[str, int] = {}
    for gpu in info.gpus:
        name = _GPU_RESOURCES.get(gpu.manufacturer)
        if name:
            out[name] = out.get(name, 0) + gpu.count
    if info.neuron:
        out[NEURON] = sum(d.count for d in info.neuron)
        out[NEURON_CORE] = info.neuron[0].count * info.neuron[0].cores
    elif info.inference and info.inference[0].manufacturer == "AWS":
        out[NEURON] = sum(d.count for d in info.inference)
    efa = info.max_efa if efa_only is None else efa_only
    if efa:
        out[EFA] = efa
    return out


def capacity(info: InstanceTypeInfo, opts: CapacityOptions) -> dict[str, int]:
    """The type's capacity as a resource list in milli-units."""
    cap = {
        "cpu": info.vcpus * MILLI,
        "memory": memory_mib(info, opts.vm_memory_overhead_percent) * MIB * MILLI,
        "pods": pods(info, opts) * MILLI,
        "ephemeral-storage": ephemeral_storage_bytes(info, opts) * MILLI,
    }
    cap.update({k: v * MILLI for k, v in extended(info, opts.efa_only).items()})
    cap.update({k: v * MILLI for k, v in vpc_resources(info, opts).items()})
    return cap


def vpc_resources(info: InstanceTypeInfo, opts: CapacityOptions) -> dict[str, int]:
    """``pod-eni`` for trunking types; ``PrivateIPv4Address`` where the type can run Windows.

    Like the other extended resources, zero counts are left out rather than listed as 0.
    """
    out: dict[str, int] = {}
    branches = vpclimits.pod_enis(opts.vpc_limits, info.name)
    if branches:
        out[POD_ENI] = branches
    # upstream adds the IP resource when the type's os requirement admits windows: a Windows
    # family on amd64 (Windows families offer arm64 types with no os at all)
    windows = opts.ami_family in amifamily.WINDOWS and ec2types.arch_label(info) == "amd64"
    ips = vpclimits.private_ipv4(opts.vpc_limits, info.name) if windows else 0
    if ips:
        out[PRIVATE_IPV4] = ips
    return out


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest."""
    cpu = vcpus * 1000
    total = 0
    for start, end, percent in ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005)):
        if cpu > start:
            total += int((min(cpu, end) - start) * percent)
    if cpu > 4000:
        total += int((cpu - 4000) * 0.0025)
    return total


def kube_reserved(info: InstanceTypeInfo, opts: CapacityOptions) -> dict[str, int]:
    """Default kube-reserved with the user's keys replacing defaults one by one."""
    feats = amifamily.features(opts.ami_family)
    # AL2/AL2023/Custom size memory on ENI-limited pods with no reserved ENIs, whatever
    # maxPods says (upstream keeps this for node-shape stability across kubelet settings).
    count = eni_limited_pods(info, 0) if feats.eni_limited_memory_overhead else pods(info, opts)
    reserved = {
        "cpu": kube_reserved_cpu_millis(info.vcpus),
        "memory": (11 * count + 255) * MIB * MILLI,
        "ephemeral-storage": GIB * MILLI,
    }
    reserved.update({k: parse_quantity(v) for k, v in opts.kubelet.kube_reserved.items()})
    return reserved


def _threshold(value: str, capacity_milli: int) -> int:
    if value.endswith("%"):
        percent = float(value[:-1])
        # upstream: "100%" means no threshold rather than the whole capacity
        return 0 if percent >= 100 else math.ceil(capacity_milli * percent / 100)
    return parse_quantity(value)


def eviction_threshold(cap: Mapping[str, int], kubelet: Kubelet) -> dict[str, int]:
    """Hard eviction: 100Mi memory and 10% of ephemeral storage unless evictionHard says so."""
    memory = kubelet.eviction_hard.get("memory.available", "100Mi")
    nodefs = kubelet.eviction_hard.get("nodefs.available", "10%")
    return {
        "memory": _threshold(memory, cap.get("memory", 0)),
        # ephemeral-storage thresholds are whole bytes: round the milli amount up
        "ephemeral-storage": math.ceil(_threshold(nodefs, cap.get("ephemeral-storage", 0)) / MILLI)
        * MILLI,
    }


def overhead(info: InstanceTypeInfo, opts: CapacityOptions) -> dict[str, int]:
    """kube-reserved + system-reserved + eviction threshold (allocatable = capacity − this)."""
    cap = capacity(info, opts)
    total = kube_reserved(info, opts)
    for name, text in opts.kubelet.system_reserved.items():
        total[name] = total.get(name, 0) + parse_quantity(text)
    for name, value in eviction_threshold(cap, opts.kubelet).items():
        total[name] = total.get(name, 0) + value
    return total
