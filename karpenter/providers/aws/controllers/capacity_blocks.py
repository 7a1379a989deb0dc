"""Capacity-block expiration: drain the nodes of a capacity block before EC2 reclaims them.

EC2 terminates a capacity block's instances when the block ends. Every minute this controller
finds NodeClaims launched into a block whose end is 40 minutes away or less (as the claim's
EC2NodeClass status lists it) and deletes them, so their termination finalizer cordons and
drains the nodes while there is still time, and the provisioner replaces them elsewhere.
The decision is ``aws/core/reservations.expiring_claims``; this module only gathers and acts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import structlog

from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import reservations as rsv

PERIOD_SECONDS = 60.0


class NodeClaimStore(Protocol):
    """The NodeClaims the controller reads and deletes."""

    def all(self) -> Iterable[NodeClaim]:
        """Every NodeClaim."""
        ...

    async def delete(self, name: str) -> None:
        """Delete the claim (its finalizer drains the node)."""
        ...


class NodeClassSource(Protocol):
    """Where the EC2NodeClasses are read."""

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        """The NodeClass by name, or None."""
        ...


class CapacityBlockExpiration:
    """Deletes NodeClaims in capacity blocks about to end."""

    def __init__(
        self,
        claims: NodeClaimStore,
        nodeclasses: NodeClassSource,
        now: Callable[[], float],
        log: Any = None,
    ) -> None:
        self.claims = claims
        self.nodeclasses = nodeclasses
        self.now = now
        self.log = log or structlog.get_logger().bind(controller="capacityreservation.expiration")

    async def reconcile(self) -> float:
        """One pass; returns the seconds until the next."""
        by_class: dict[str, list[tuple[str, str]]] = {}
        for claim in self.claims.all():
            rid = claim.labels.get(rsv.ID_LABEL, "")
            if rid and not claim.deleting:
                by_class.setdefault(claim.node_class_ref.name, []).append((claim.name, rid))
        now = self.now()
        for name, members in sorted(by_class.items()):
            node_class = await self.nodeclasses.get(name)
            if node_class is None:
                continue
            due = rsv.expiring_claims(members, node_class.status.capacity_reservations, now)
            for claim_name in due:
                self.log.info(
                    "initiating delete for capacity block expiration", nodeclaim=claim_name
                )
                await self.claims.delete(claim_name)
        return PERIOD_SECONDS
