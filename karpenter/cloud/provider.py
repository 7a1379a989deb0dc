"""The CloudProvider port: what the controllers need from a cloud, and its typed errors.

Every implementation (the in-memory simulated cloud, AWS) speaks core model values: a
NodeClaim goes in, the same NodeClaim comes back filled with what the cloud launched
(provider id, instance type/zone/capacity-type labels, capacity, allocatable, image id).
Controllers branch on the error types below, never on message text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.repair import RepairPolicy


class CloudProviderError(Exception):
    """Base of every error a CloudProvider raises on purpose."""


@dataclass(frozen=True, slots=True)
class OfferingRef:
    """One (instance type, zone, capacity type) the cloud could not serve."""

    instance_type: str
    zone: str
    capacity_type: str


class InsufficientCapacityError(CloudProviderError):
    """No requested offering had capacity; ``offerings`` are the ones that failed.

    The lifecycle controller deletes the NodeClaim (the provisioner retries with fresh
    availability) and records the offerings as unavailable for a while.
    """

    def __init__(self, message: str, offerings: tuple[OfferingRef, ...] = ()) -> None:
        super().__init__(message)
        self.offerings = offerings


class NodeClaimNotFoundError(CloudProviderError):
    """The instance behind a NodeClaim does not exist (any more)."""


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClaim's NodeClass is missing or not Ready; launching would fail the same way."""


class CreateError(CloudProviderError):
    """A launch failed for a reason other than capacity; ``reason`` is machine-readable."""

    def __init__(self, message: str, reason: str = "LaunchFailed") -> None:
        super().__init__(message)
        self.reason = reason


class CloudProvider(Protocol):
    """The port. Implementations are safe to call concurrently from several controllers."""

    @property
    def name(self) -> str:
        """Short provider name used in metrics and logs (``simulated``, ``aws``)."""
        ...

    async def create(self, claim: NodeClaim) -> NodeClaim:
        """Launch an instance for ``claim``; returns the claim filled with what launched."""
        ...

    async def delete(self, claim: NodeClaim) -> None:
        """Terminate the claim's instance; raises NodeClaimNotFoundError once it is gone."""
        ...

    async def get(self, provider_id: str) -> NodeClaim:
        """The launched instance with this provider id; NodeClaimNotFoundError if none."""
        ...

    async def list(self) -> list[NodeClaim]:
        """Every instance this provider launched for this cluster (garbage collection)."""
        ...

    async def instance_types(self, nodepool: NodePool) -> tuple[InstanceType, ...]:
        """The instance types (with current offerings and prices) a NodePool may launch."""
        ...

    async def is_drifted(self, claim: NodeClaim) -> str:
        """A machine-readable drift reason for cloud-side drift, or ``""`` when none."""
        ...

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """Node conditions that justify replacing a node, and for how long (NodeRepair)."""
        ...
