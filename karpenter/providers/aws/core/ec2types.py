"""EC2 instance-type descriptions: a DescribeInstanceTypes item read into a typed value.

The adapter (and the ``aws`` simulate preset, from moto's bundled data) hands over the JSON
shape EC2 returns; everything downstream (capacity, overhead, labels) reads this value only.
Missing fields read as "not supported", as EC2 omits them for older generations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Raw = Mapping[str, object]


def _map(raw: object, key: str) -> Raw:
    value = raw.get(key) if isinstance(raw, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _list(raw: Raw, key: str) -> Sequence[object]:
    value = raw.get(key)
    return value if isinstance(value, list) else []


def _int(raw: Raw, key: str, default: int = 0) -> int:
    value = raw.get(key)
    return (
        int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default
    )


def _str(raw: Raw, key: str) -> str:
    value = raw.get(key)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU / accelerator / Neuron entry: ``count`` devices of ``name``."""

    name: str
    manufacturer: str
    count: int
    memory_mib: int = 0
    cores: int = 0


@dataclass(frozen=True, slots=True)
class InstanceTypeInfo:
    """What Karpenter reads from one DescribeInstanceTypes item."""

    name: str
    vcpus: int
    memory_mib: int
    architectures: tuple[str, ...]
    manufacturer: str = ""
    sustained_clock_ghz: float | None = None
    hypervisor: str = ""
    bare_metal: bool = False
    usage_classes: tuple[str, ...] = ("on-demand",)
    virtualization_types: tuple[str, ...] = ("hvm",)
    ebs_bandwidth_mbps: int | None = None
    network_bandwidth_mbps: int | None = None
    max_enis: int = 0
    ipv4_per_eni: int = 0
    max_efa: int = 0
    network_cards: int = 1
    gpus: tuple[Device, ...] = ()
    inference: tuple[Device, ...] = ()
    neuron: tuple[Device, ...] = ()
    instance_storage_gb: int = 0
    nvme_storage: bool = False
    encryption_in_transit: bool = False
    nitro_enclaves: bool = False
    features: tuple[str, ...] = ()
    placement_strategies: tuple[str, ...] = ()  # PlacementGroupInfo.SupportedStrategies


def _devices(items: Sequence[object]) -> tuple[Device, ...]:
    out = []
    for item in items:
        if isinstance(item, Mapping):
            out.append(
                Device(
                    _str(item, "Name"),
                    _str(item, "Manufacturer"),
                    _int(item, "Count"),
                    _int(_map(item, "MemoryInfo"), "SizeInMiB"),
                    _int(_map(item, "CoreInfo"), "Count"),
                )
            )
    return tuple(out)


def _default_card(network: Raw) -> Raw:
    index = _int(network, "DefaultNetworkCardIndex")
    for card in _list(network, "NetworkCards"):
        if isinstance(card, Mapping) and _int(card, "NetworkCardIndex") == index:
            return card
    return {}


def _network_bandwidth(network: Raw) -> int | None:
    # Upstream ships a table scraped from the EC2 docs (baseline Mbps); the same number is
    # the sum of the cards' BaselineBandwidthInGbps that DescribeInstanceTypes now returns.
    total = 0.0
    for card in _list(network, "NetworkCards"):
        if isinstance(card, Mapping):
            value = card.get("BaselineBandwidthInGbps")
            if isinstance(value, (int, float)):
                total += float(value)
    return round(total * 1000) if total > 0 else None


def parse(raw: Raw) -> InstanceTypeInfo:
    """Read one DescribeInstanceTypes item (as EC2 / moto / botocore return it)."""
    processor = _map(raw, "ProcessorInfo")
    network = _map(raw, "NetworkInfo")
    ebs = _map(raw, "EbsInfo")
    storage = _map(raw, "InstanceStorageInfo")
    clock = processor.get("SustainedClockSpeedInGhz")
    card = _default_card(network)
    ebs_opt = _map(ebs, "EbsOptimizedInfo")
    return InstanceTypeInfo(
        name=_str(raw, "InstanceType"),
        vcpus=_int(_map(raw, "VCpuInfo"), "DefaultVCpus"),
        memory_mib=_int(_map(raw, "MemoryInfo"), "SizeInMiB"),
        architectures=tuple(str(a) for a in _list(processor, "SupportedArchitectures")),
        manufacturer=_str(processor, "Manufacturer"),
        sustained_clock_ghz=float(clock) if isinstance(clock, (int, float)) else None,
        hypervisor=_str(raw, "Hypervisor"),
        bare_metal=raw.get("BareMetal") is True,
        usage_classes=tuple(str(u) for u in _list(raw, "SupportedUsageClasses")),
        virtualization_types=tuple(str(v) for v in _list(raw, "SupportedVirtualizationTypes")),
        ebs_bandwidth_mbps=_int(ebs_opt, "MaximumBandwidthInMbps") or None
        if _str(ebs, "EbsOptimizedSupport") == "default"
        else None,
        network_bandwidth_mbps=_network_bandwidth(network),
        max_enis=_int(card, "MaximumNetworkInterfaces", _int(network, "MaximumNetworkInterfaces")),
        ipv4_per_eni=_int(network, "Ipv4AddressesPerInterface"),
        max_efa=_int(_map(network, "EfaInfo"), "MaximumEfaInterfaces"),
        network_cards=_int(network, "MaximumNetworkCards", 1),
        gpus=_devices(_list(_map(raw, "GpuInfo"), "Gpus")),
        inference=_devices(_list(_map(raw, "InferenceAcceleratorInfo"), "Accelerators")),
        neuron=_devices(_list(_map(raw, "NeuronInfo"), "NeuronDevices")),
        instance_storage_gb=_int(storage, "TotalSizeInGB"),
        nvme_storage=_str(storage, "NvmeSupport") in ("supported", "required"),
        encryption_in_transit=network.get("EncryptionInTransitSupported") is True,
        nitro_enclaves=_str(raw, "NitroEnclavesSupport") == "supported",
        features=tuple(str(f) for f in _list(processor, "SupportedFeatures")),
        placement_strategies=tuple(
            str(s) for s in _list(_map(raw, "PlacementGroupInfo"), "SupportedStrategies")
        ),
    )


def discoverable(info: InstanceTypeInfo) -> bool:
    """Upstream's discovery filter: HVM, and an x86_64 or arm64 processor."""
    return "hvm" in info.virtualization_types and any(
        a in ("x86_64", "arm64") for a in info.architectures
    )


_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def arch_label(info: InstanceTypeInfo) -> str:
    """``kubernetes.io/arch`` of the type: the first supported architecture Kubernetes names.

    Upstream skips the ones it cannot map, so ``t2.medium`` (``i386``, ``x86_64``) is amd64;
    a type with none of them keeps its first one (such types are not discovered anyway).
    """
    known = next((_KUBE_ARCH[a] for a in info.architectures if a in _KUBE_ARCH), None)
    return known or (info.architectures[0] if info.architectures else "")
