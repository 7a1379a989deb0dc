"""The ``karpenter.k8s.aws/*`` labels: keys, and the values an instance type offers.

Values are strings, as node labels are; a label a type does not have is absent (the catalog
turns absence into ``DoesNotExist`` so ``Exists`` selectors work).
"""

from __future__ import annotations

import re

from karpenter.providers.aws.core.ec2types import InstanceTypeInfo

GROUP = "karpenter.k8s.aws"
CATEGORY = f"{GROUP}/instance-category"
FAMILY = f"{GROUP}/instance-family"
GENERATION = f"{GROUP}/instance-generation"
SIZE = f"{GROUP}/instance-size"
FLEX = f"{GROUP}/instance-capability-flex"
CPU = f"{GROUP}/instance-cpu"
CPU_MANUFACTURER = f"{GROUP}/instance-cpu-manufacturer"
CPU_CLOCK = f"{GROUP}/instance-cpu-sustained-clock-speed-mhz"
MEMORY = f"{GROUP}/instance-memory"
EBS_BANDWIDTH = f"{GROUP}/instance-ebs-bandwidth"
NETWORK_BANDWIDTH = f"{GROUP}/instance-network-bandwidth"
GPU_NAME = f"{GROUP}/instance-gpu-name"
GPU_MANUFACTURER = f"{GROUP}/instance-gpu-manufacturer"
GPU_COUNT = f"{GROUP}/instance-gpu-count"
GPU_MEMORY = f"{GROUP}/instance-gpu-memory"
ACCELERATOR_NAME = f"{GROUP}/instance-accelerator-name"
ACCELERATOR_MANUFACTURER = f"{GROUP}/instance-accelerator-manufacturer"
ACCELERATOR_COUNT = f"{GROUP}/instance-accelerator-count"
HYPERVISOR = f"{GROUP}/instance-hypervisor"
ENCRYPTION_IN_TRANSIT = f"{GROUP}/instance-encryption-in-transit-supported"
LOCAL_NVME = f"{GROUP}/instance-local-nvme"
TENANCY = f"{GROUP}/instance-tenancy"
ZONE_ID = "topology.k8s.aws/zone-id"

NODECLASS = f"{GROUP}/ec2nodeclass"
ANNOTATION_NODECLASS_HASH = f"{GROUP}/ec2nodeclass-hash"
ANNOTATION_NODECLASS_HASH_VERSION = f"{GROUP}/ec2nodeclass-hash-version"
ANNOTATION_INSTANCE_PROFILE = f"{GROUP}/instance-profile-name"
NODECLASS_HASH_VERSION = "v6"
FINALIZER = f"{GROUP}/termination"

# Every key a type's requirements may name: the scheduler treats them as well-known.
ALL = (
    CATEGORY,
    FAMILY,
    GENERATION,
    SIZE,
    FLEX,
    CPU,
    CPU_MANUFACTURER,
    CPU_CLOCK,
    MEMORY,
    EBS_BANDWIDTH,
    NETWORK_BANDWIDTH,
    GPU_NAME,
    GPU_MANUFACTURER,
    GPU_COUNT,
    GPU_MEMORY,
    ACCELERATOR_NAME,
    ACCELERATOR_MANUFACTURER,
    ACCELERATOR_COUNT,
    HYPERVISOR,
    ENCRYPTION_IN_TRANSIT,
    LOCAL_NVME,
    TENANCY,
    ZONE_ID,
)

_CATEGORY_GENERATION = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")


def kebab(text: str) -> str:
    """EC2 names as label values: lower case, spaces as dashes (``NVIDIA T4``: ``nvidia-t4``)."""
    return text.strip().lower().replace(" ", "-")


def instance_labels(info: InstanceTypeInfo) -> dict[str, str]:
    """Every ``karpenter.k8s.aws/instance-*`` label value of a type (absent: DoesNotExist)."""
    out: dict[str, str] = {}
    family, _, size = info.name.partition(".")
    match = _CATEGORY_GENERATION.match(info.name)
    if match:
        out[CATEGORY] = match[1]
        out[GENERATION] = match[3]
    out[FAMILY] = family
    out[SIZE] = size
    out[FLEX] = "true" if "-flex" in family else "false"
    out[CPU] = str(info.vcpus)
    if info.manufacturer:
        out[CPU_MANUFACTURER] = kebab(info.manufacturer)
    if info.sustained_clock_ghz:
        out[CPU_CLOCK] = str(round(info.sustained_clock_ghz * 1000))
    out[MEMORY] = str(info.memory_mib)
    if info.ebs_bandwidth_mbps:
        out[EBS_BANDWIDTH] = str(info.ebs_bandwidth_mbps)
    if info.network_bandwidth_mbps:
        out[NETWORK_BANDWIDTH] = str(info.network_bandwidth_mbps)
    if len(info.gpus) == 1:
        gpu = info.gpus[0]
        out[GPU_NAME] = kebab(gpu.name)
        out[GPU_MANUFACTURER] = kebab(gpu.manufacturer)
        out[GPU_COUNT] = str(gpu.count)
        out[GPU_MEMORY] = str(gpu.memory_mib)
    out.update(_accelerator(info))
    out[HYPERVISOR] = info.hypervisor
    out[ENCRYPTION_IN_TRANSIT] = "true" if info.encryption_in_transit else "false"
    if info.nvme_storage and info.instance_storage_gb:
        out[LOCAL_NVME] = str(info.instance_storage_gb)
    return out


def _accelerator(info: InstanceTypeInfo) -> dict[str, str]:
    if len(info.inference) == 1 and not info.neuron:
        acc = info.inference[0]
        return {
            ACCELERATOR_NAME: kebab(acc.name),
            ACCELERATOR_MANUFACTURER: kebab(acc.manufacturer),
            ACCELERATOR_COUNT: str(acc.count),
        }
    if len(info.neuron) == 1:
        dev = info.neuron[0]
        return {
            ACCELERATOR_NAME: kebab(dev.name),
            ACCELERATOR_MANUFACTURER: "aws",
            ACCELERATOR_COUNT: str(dev.count),
        }
    return {}
