"""NodeClaim garbage collection: claims whose instance vanished from the cloud.

An instance can disappear behind Karpenter's back (terminated in the console, reclaimed without
an interruption message). Every two minutes the cloud's instance list is compared with the
registered NodeClaims: a claim whose providerID is no longer listed is deleted (reason
``garbage_collected``), unless its Node is still there and Ready, which means the list is the
one that is wrong (eventual consistency) rather than the node. Only registered claims are
considered: a launching claim may not be listed yet, and its own timeouts cover it.
"""

from __future__ import annotations

from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS

INTERVAL_S = 120.0


class NodeClaimGC(Controller):
    """Deletes registered NodeClaims whose instances the cloud no longer lists."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, "nodeclaim.garbagecollection")
        self.collected: list[str] = []  # names deleted by the last pass (logs and tests)

    def _node_ready(self, claim: NodeClaim) -> bool:
        for raw in self.state.node_by_provider_id(claim.provider_id):
            cond = codec.condition(raw, "Ready")
            if cond is not None and cond.get("status") == "True":
                return True
        return False

    async def reconcile(self) -> float:
        """One pass; returns the wait before the next."""
        # The list first: a claim registered after it was taken was launched before it.
        listed = {c.provider_id for c in await self.cloud.list() if c.provider_id}
        self.collected = []
        for claim in self.state.nodeclaims.values():
            if (
                claim.deleting
                or not claim.registered
                or not claim.provider_id
                or claim.provider_id in listed
                or self._node_ready(claim)
            ):
                continue
            self._log.info(
                "garbage collecting nodeclaim with no instance",
                nodeclaim=claim.name,
                provider_id=claim.provider_id,
            )
            try:
                await self.kube.delete(NODECLAIMS, claim.name)
            except errors.NotFound:
                continue
            self.collected.append(claim.name)
            self.metrics.nodeclaims_disrupted.labels(
                reason="garbage_collected",
                nodepool=claim.nodepool,
                capacity_type=claim.labels.get(lbl.CAPACITY_TYPE, ""),
                consolidation_policy="",
                termination_mode="graceful",
            ).inc()
        return INTERVAL_S

    async def run(self) -> None:
        """Collect forever; a failed pass (the cloud unreachable) is logged and retried."""
        while True:
            try:
                wait = await self.reconcile()
            except Exception as err:  # the next pass may succeed; never stop the loop
                self._log.warning("garbage collection failed", error=repr(err))
                wait = INTERVAL_S
            await self.clock.sleep(wait)
