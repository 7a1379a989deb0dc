"""Interruption controller: an EC2 interruption message → the NodeClaim is deleted.

Deleting the claim is how Karpenter drains ahead of the interruption: the termination
finalizer cordons and drains the node, the evicted pods become pending, and the provisioner
launches their replacement. A spot interruption also hides its spot pool (type, zone) for
3 minutes so the replacement goes elsewhere; a capacity-reservation interruption marks the
claim's reservation as full, so the replacement is not planned into it. Rebalance
recommendations only produce an event.
Coded against small Protocols so it runs on the kube state after merge and on a dict in tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.cloud import sqs
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import interruption, tags
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.core.unavailable import UnavailableOfferings


class NodeClaimStore(Protocol):
    """The NodeClaims the controller may act on."""

    async def find_by_instance_id(self, instance_id: str) -> NodeClaim | None:
        """The claim whose provider id ends in this instance id."""
        ...

    async def delete(self, name: str) -> None:
        """Delete the claim (its finalizer drains the node)."""
        ...


class EventRecorder(Protocol):
    """Kubernetes events on NodeClaims."""

    def publish(self, claim: NodeClaim, reason: str, message: str) -> None:
        """Record one event."""
        ...


class InterruptionController:
    """Turns parsed interruption messages into NodeClaim deletions."""

    def __init__(
        self,
        claims: NodeClaimStore,
        unavailable: UnavailableOfferings,
        now: Callable[[], float],
        events: EventRecorder,
        log: Any = None,
        reservations: rsv.Availability | None = None,
    ) -> None:
        self.claims = claims
        self.reservations = reservations
        self.unavailable = unavailable
        self.now = now
        self.events = events
        self.log = log or structlog.get_logger().bind(controller="interruption")

    async def handle(self, message: interruption.Message) -> None:
        """Act on one message (messages for unknown instances are simply done)."""
        for instance_id in message.instance_ids:
            claim = await self.claims.find_by_instance_id(instance_id)
            if claim is None:
                continue
            reason, text = message.event()
            self.events.publish(claim, reason, text)
            if message.marks_spot_unavailable:
                self.unavailable.mark(
                    lbl.CAPACITY_TYPE_SPOT,
                    claim.labels.get(lbl.INSTANCE_TYPE, ""),
                    claim.labels.get(lbl.ZONE, ""),
                    self.now(),
                )
            rid = claim.labels.get(rsv.ID_LABEL, "")
            reclaimed = message.kind == interruption.CAPACITY_RESERVATION_INTERRUPTED
            if reclaimed and rid and self.reservations is not None:
                self.reservations.exhaust(rid, self.now())
            if message.action == interruption.ACTION_DELETE and not claim.deleting:
                await self.claims.delete(claim.name)
                self.events.publish(
                    claim,
                    "TerminatingOnInterruption",
                    "Interruption triggered termination for the NodeClaim/Node",
                )
                self.log.info(
                    "deleted nodeclaim on interruption", nodeclaim=claim.name, kind=message.kind
                )

    async def run(
        self, sqs_client: Client, queue_name: str, sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        """Poll the queue until cancelled (``sleep``: the injected clock's, for backoff)."""
        url = await sqs.queue_url(sqs_client, queue_name)
        await sqs.poll_interruptions(sqs_client, url, self.handle, self.log, sleep)


def instance_id_of(claim: NodeClaim) -> str:
    """The EC2 instance id of a claim (``""`` when it has no AWS provider id)."""
    return tags.instance_id(claim.provider_id)
