"""Garbage collection: terminate instances tagged for this cluster that no NodeClaim owns.

A leaked instance (its NodeClaim was deleted while a launch was in flight, or the controller
crashed between CreateFleet and creating the claim) costs money forever. Instances younger than
30 seconds are left alone (their claim may not be written yet). The Node registered for a
collected instance is deleted too. Upstream runs every 10s for the first 20 runs, then every 2m.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog

from karpenter.cloud.provider import CloudProviderError, NodeClaimNotFoundError
from karpenter.core.model.node import NodeClaim

GRACE_SECONDS = 30.0
FAST_PERIOD = 10.0
SLOW_PERIOD = 120.0
FAST_RUNS = 20


class Cloud(Protocol):
    """The part of the cloud provider the collector uses."""

    async def list(self) -> list[NodeClaim]:
        """Every instance Karpenter launched for this cluster."""
        ...

    async def delete(self, claim: NodeClaim) -> None:
        """Terminate one instance."""
        ...


class ClusterView(Protocol):
    """What the cluster knows: claims' provider ids, and Nodes to delete."""

    async def claimed_provider_ids(self) -> set[str]:
        """Provider ids of every NodeClaim."""
        ...

    async def delete_node(self, provider_id: str) -> None:
        """Delete the Node with this provider id, if any."""
        ...


class GarbageCollector:
    """Terminates unowned cluster instances; ``reconcile`` returns when to run again."""

    def __init__(
        self, cloud: Cloud, cluster: ClusterView, now: Callable[[], float], log: Any = None
    ) -> None:
        self.cloud = cloud
        self.cluster = cluster
        self.now = now
        self.runs = 0
        self.log = log or structlog.get_logger().bind(controller="instance.garbagecollection")

    async def reconcile(self) -> tuple[list[str], float]:
        """Collect once; returns (terminated provider ids, seconds until the next run)."""
        owned = await self.cluster.claimed_provider_ids()
        now = self.now()
        collected = []
        for claim in await self.cloud.list():
            if claim.provider_id in owned or claim.instance_terminating:
                continue
            if now - claim.creation < GRACE_SECONDS:
                continue
            try:
                await self.cloud.delete(claim)
            except NodeClaimNotFoundError:
                pass  # gone already: still clean its Node up
            except CloudProviderError as err:
                # refused (a zonal-shifted zone): keep it and its Node, collect the others
                self.log.info("not collected", provider_id=claim.provider_id, reason=str(err))
                continue
            await self.cluster.delete_node(claim.provider_id)
            collected.append(claim.provider_id)
            self.log.info("garbage collected leaked instance", provider_id=claim.provider_id)
        self.runs += 1
        return collected, FAST_PERIOD if self.runs < FAST_RUNS else SLOW_PERIOD
