"""Capacity and overhead of real EC2 types, checked against upstream's published numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from karpenter.core.model.quantity import MILLI
from karpenter.providers.aws.core import amifamily, capacity
from karpenter.providers.aws.core.capacity import CapacityOptions, Kubelet
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.vpclimits import VpcLimits

MIB = 2**20 * MILLI
GIB = 2**30 * MILLI
AL2 = CapacityOptions(ami_family=amifamily.AL2)


@pytest.mark.parametrize(
    ("name", "cpu_m", "memory_mi", "pods", "ephemeral_gi"),
    [
        # upstream's generated instance-types doc (AL2, no BDMs): allocatable of a1.*
        pytest.param("a1.medium", 940, 1392, 8, 17, id="a1.medium"),
        pytest.param("a1.large", 1930, 3055, 29, 17, id="a1.large"),
    ],
)
def test_allocatable_matches_upstream_doc(
    ec2: dict[str, InstanceTypeInfo],
    name: str,
    cpu_m: int,
    memory_mi: int,
    pods: int,
    ephemeral_gi: int,
) -> None:
    """Capacity less overhead equals upstream's documented allocatable for the same type."""
    info = ec2[name]
    cap = capacity.capacity(info, AL2)
    over = capacity.overhead(info, AL2)
    assert cap["cpu"] - over["cpu"] == cpu_m
    assert cap["memory"] - over["memory"] == memory_mi * MIB
    assert cap["pods"] == pods * MILLI
    assert cap["ephemeral-storage"] - over["ephemeral-storage"] == ephemeral_gi * GIB


@pytest.mark.parametrize(
    ("vcpus", "millis"),
    [(1, 60), (2, 70), (4, 80), (8, 90), (16, 110), (48, 190), (96, 310)],
)
def test_kube_reserved_cpu_tiers(vcpus: int, millis: int) -> None:
    """kube-reserved CPU follows the 6/1/0.5/0.25 percent tiers."""
    assert capacity.kube_reserved_cpu_millis(vcpus) == millis


def test_memory_overhead_percent(ec2: dict[str, InstanceTypeInfo]) -> None:
    """m5.large: 8192 MiB less ceil(7.5%) = 7577 MiB; 0 overhead keeps the full size."""
    info = ec2["m5.large"]
    assert capacity.memory_mib(info, 0.075) == 8192 - 615
    assert capacity.memory_mib(info, 0.0) == 8192


def test_eni_limited_pods_and_reserved_enis(ec2: dict[str, InstanceTypeInfo]) -> None:
    """m5.large has 3 ENIs × 10 IPs: 29 pods, 20 with one reserved ENI, 0 with all reserved."""
    info = ec2["m5.large"]
    assert capacity.eni_limited_pods(info, 0) == 29
    assert capacity.eni_limited_pods(info, 1) == 20
    assert capacity.eni_limited_pods(info, 3) == 0


def test_multi_card_types_use_default_card(ec2: dict[str, InstanceTypeInfo]) -> None:
    """p4d.24xlarge: 15 ENIs on card 0 × 49 IPs + 2 = 737 pods (upstream's figure)."""
    assert capacity.eni_limited_pods(ec2["p4d.24xlarge"], 0) == 737


def test_max_pods_and_pods_per_core(ec2: dict[str, InstanceTypeInfo]) -> None:
    """kubelet maxPods wins over ENI limits; podsPerCore caps, except on Bottlerocket."""
    info = ec2["m5.xlarge"]
    assert capacity.pods(info, CapacityOptions(kubelet=Kubelet(max_pods=110))) == 110
    assert capacity.pods(info, CapacityOptions(kubelet=Kubelet(pods_per_core=2))) == 8
    br = CapacityOptions(ami_family=amifamily.BOTTLEROCKET, kubelet=Kubelet(pods_per_core=2))
    assert capacity.pods(info, br) == 58
    assert capacity.pods(info, CapacityOptions(ami_family=amifamily.WINDOWS2022)) == 110


def test_gpu_neuron_efa_resources(ec2: dict[str, InstanceTypeInfo]) -> None:
    """GPUs, Neuron devices/cores and EFA interfaces become extended resources."""
    assert capacity.extended(ec2["g4dn.xlarge"]) == {"nvidia.com/gpu": 1}
    p4d = capacity.extended(ec2["p4d.24xlarge"])
    assert p4d == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 4}
    inf2 = capacity.extended(ec2["inf2.xlarge"])
    assert inf2 == {"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 2}


def test_kubelet_overrides_overhead(ec2: dict[str, InstanceTypeInfo]) -> None:
    """kubeReserved keys replace defaults, systemReserved adds, evictionHard replaces 100Mi."""
    info = ec2["m5.large"]
    opts = CapacityOptions(
        kubelet=Kubelet(
            kube_reserved={"cpu": "200m"},
            system_reserved={"memory": "100Mi"},
            eviction_hard={"memory.available": "5%", "nodefs.available": "100%"},
        )
    )
    over = capacity.overhead(info, opts)
    cap = capacity.capacity(info, opts)
    assert over["cpu"] == 200
    expected_memory = (11 * 29 + 255) * MIB + 100 * MIB + -(-cap["memory"] * 5 // 100)
    assert over["memory"] == expected_memory
    assert over["ephemeral-storage"] == GIB  # 100% means no threshold


def test_raid0_and_volume_ephemeral_storage(ec2: dict[str, InstanceTypeInfo]) -> None:
    """RAID0 uses the instance store size; otherwise the family's volume (20Gi default)."""
    info = ec2["m5d.large"]
    assert capacity.ephemeral_storage_bytes(info, CapacityOptions(instance_store_raid0=True)) == (
        75 * 10**9
    )
    assert capacity.ephemeral_storage_bytes(info, CapacityOptions()) == 20 * 2**30
    sized = CapacityOptions(ephemeral_volume_bytes=100 * 2**30)
    assert capacity.ephemeral_storage_bytes(info, sized) == 100 * 2**30


def test_efa_only_interfaces(ec2: dict[str, InstanceTypeInfo]) -> None:
    """efa-only interfaces on card 0 take ENIs from pods; EFA capacity counts the spec's."""
    info = ec2["p4d.24xlarge"]
    opts = CapacityOptions(efa_only_card0=1, efa_only=2)
    assert capacity.pods(info, opts) == 14 * 49 + 2
    assert capacity.capacity(info, opts)["vpc.amazonaws.com/efa"] == 2 * MILLI


def test_windows_private_ipv4_resource(
    ec2: dict[str, InstanceTypeInfo], vpc: Mapping[str, VpcLimits]
) -> None:
    """Windows nodes advertise the primary ENI's secondary IPs (IPv4 per ENI − 1)."""
    opts = CapacityOptions(ami_family=amifamily.WINDOWS2022, vpc_limits=vpc)
    win = capacity.capacity(ec2["m5.large"], opts)
    assert win["vpc.amazonaws.com/PrivateIPv4Address"] == 9 * MILLI
    assert win["pods"] == 110 * MILLI
    linux = capacity.capacity(ec2["m5.large"], replace(AL2, vpc_limits=vpc))
    assert "vpc.amazonaws.com/PrivateIPv4Address" not in linux
