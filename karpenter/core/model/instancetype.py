"""Instance types and their offerings: what the cloud can launch, where, and at what price."""

from __future__ import annotations

from dataclasses import dataclass, field

from karpenter.core.model import resources as res
from karpenter.core.model.resources import Resources
from karpenter.core.scheduling.requirements import Requirements


@dataclass(frozen=True, slots=True)
class Offering:
    """One (zone, capacity type) way to buy an instance type.

    A ``reserved`` offering is one capacity reservation: ``reservation_id`` names it and
    ``reservation_capacity`` says how many more instances it can still start.
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    reservation_capacity: int = 0
    reservation_id: str = ""


@dataclass(frozen=True, slots=True)
class InstanceType:
    """An instance type: label requirements it satisfies, capacity, overhead and offerings."""

    name: str
    requirements: Requirements
    offerings: tuple[Offering, ...]
    capacity: Resources
    overhead: Resources = field(default_factory=dict)

    @property
    def allocatable(self) -> dict[str, int]:
        """Capacity less overhead (hugepages also come out of memory), floored at zero."""
        alloc = res.floor_zero(res.subtract(self.capacity, self.overhead))
        huge = sum(v for k, v in self.capacity.items() if k.startswith("hugepages-"))
        if huge and res.MEMORY in alloc:
            alloc[res.MEMORY] = max(alloc[res.MEMORY] - huge, 0)
        return alloc
