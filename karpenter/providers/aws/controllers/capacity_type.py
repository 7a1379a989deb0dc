"""Capacity-type sync: a reserved node whose reservation ended becomes an on-demand node.

When an ODCR ends, EC2 keeps its instances running, billed as on-demand, and stops reporting a
reservation for them. Every minute this controller asks the cloud about each NodeClaim labelled
``reserved``; when the instance no longer reports one, the claim and its Node are relabelled
``on-demand`` and lose the reservation labels, so scheduling, consolidation prices and
reservation accounting see what the node really is (a NodePool that only allows reserved
capacity then sees the node as drifted and replaces it, as upstream does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import structlog

from karpenter.cloud.provider import NodeClaimNotFoundError
from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.core import reservations as rsv

PERIOD_SECONDS = 60.0
DEMOTED = {lbl.CAPACITY_TYPE: lbl.CAPACITY_TYPE_ON_DEMAND, **dict.fromkeys(rsv.LABELS)}


class NodeClaimStore(Protocol):
    """NodeClaims, and relabelling a claim together with its Node."""

    def all(self) -> Iterable[NodeClaim]:
        """Every NodeClaim."""
        ...

    async def relabel(self, claim: NodeClaim, labels: dict[str, str | None]) -> None:
        """Merge labels into the claim and its Node (``None`` removes a label)."""
        ...


class InstanceSource(Protocol):
    """What the cloud says about an instance now."""

    async def get(self, provider_id: str) -> NodeClaim:
        """The instance as a NodeClaim (labels carry its capacity type)."""
        ...


class CapacityTypeSync:
    """Relabels reserved NodeClaims whose instance is no longer in a reservation."""

    def __init__(self, claims: NodeClaimStore, cloud: InstanceSource, log: Any = None) -> None:
        self.claims = claims
        self.cloud = cloud
        self.log = log or structlog.get_logger().bind(controller="capacityreservation.capacitytype")

    async def reconcile(self) -> float:
        """One pass; returns the seconds until the next."""
        reserved = [
            c
            for c in self.claims.all()
            if c.labels.get(lbl.CAPACITY_TYPE) == lbl.CAPACITY_TYPE_RESERVED
            and c.provider_id
            and not c.deleting
        ]
        for claim in sorted(reserved, key=lambda c: c.name):
            try:
                current = await self.cloud.get(claim.provider_id)
            except NodeClaimNotFoundError:
                continue  # gone: garbage collection and termination deal with it
            if current.labels.get(lbl.CAPACITY_TYPE) == lbl.CAPACITY_TYPE_RESERVED:
                continue
            await self.claims.relabel(claim, dict(DEMOTED))
            self.log.info(
                "reservation ended, node is on-demand now",
                nodeclaim=claim.name,
                reservation=claim.labels.get(rsv.ID_LABEL, ""),
            )
        return PERIOD_SECONDS
