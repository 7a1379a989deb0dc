"""The ``fake`` catalog: the instance types of Karpenter's own scheduling benchmark.

Type ``i`` (``fake-it-<i>``) has ``i+1`` CPUs, ``2*(i+1)`` GiB of memory and room for
``10*(i+1)`` pods, 100m CPU and 10Mi memory of overhead, and five available offerings priced
``0.1 * cpu + 0.1 * memory_bytes / 1e9``. Types above 4 CPUs and 8 GiB are ``size=large`` with
``special=optional``; the others are ``size=small`` without ``special``.
"""

from __future__ import annotations

from karpenter.core.model import labels as lbl
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.quantity import MILLI
from karpenter.core.scheduling.requirements import Requirement, Requirements

GIB = 2**30
OFFERINGS = (
    (lbl.CAPACITY_TYPE_SPOT, "test-zone-1"),
    (lbl.CAPACITY_TYPE_SPOT, "test-zone-2"),
    (lbl.CAPACITY_TYPE_ON_DEMAND, "test-zone-1"),
    (lbl.CAPACITY_TYPE_ON_DEMAND, "test-zone-2"),
    (lbl.CAPACITY_TYPE_ON_DEMAND, "test-zone-3"),
)
LABEL_KEYS = ("size", "special", "integer")


def price_from_resources(cpu: int, memory_bytes: int) -> float:
    """Upstream's fake pricing: 0.1 per CPU plus 0.1 per GB of memory."""
    return 0.1 * cpu + 0.1 * memory_bytes / 1e9


def fake_instance_type(index: int) -> InstanceType:
    """The ``index``-th type of the fake catalog."""
    cpu = index + 1
    memory = 2 * cpu * GIB
    large = cpu > 4 and memory > 8 * GIB
    reqs = [
        Requirement.new(lbl.ARCH, "In", ["amd64"]),
        Requirement.new(lbl.OS, "In", ["darwin", "linux", "windows"]),
        Requirement.new("integer", "In", [str(cpu)]),
        Requirement.new("size", "In", ["large" if large else "small"]),
        Requirement.new("special", "In", ["optional"])
        if large
        else Requirement.new("special", "DoesNotExist"),
    ]
    price = price_from_resources(cpu, memory)
    return InstanceType(
        f"fake-it-{index}",
        Requirements(reqs),
        tuple(Offering(zone, ct, price) for ct, zone in OFFERINGS),
        {"cpu": cpu * MILLI, "memory": memory * MILLI, "pods": 10 * cpu * MILLI},
        {"cpu": 100, "memory": 10 * 2**20 * MILLI},
    )


def fake_instance_types(count: int) -> tuple[InstanceType, ...]:
    """``count`` fake types, ``fake-it-0`` first."""
    return tuple(fake_instance_type(i) for i in range(count))
