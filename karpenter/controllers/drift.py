"""Cloud-provider drift: ask the provider about every initialized NodeClaim, record the answer.

The NodePool side of drift (template hash, requirements, vanished instance types) is decided
by the pure core from the snapshot. What only the cloud knows (an AMI, subnet or security group
that changed under a NodeClass, a NodeClass hash mismatch) comes from
``CloudProvider.is_drifted`` and is written as the NodeClaim's ``Drifted`` condition, with the
provider's reason. The core reads that condition as the last drift source, and ``kubectl``
shows it. A claim no longer drifted loses the condition. Writes carry the claim's
resourceVersion, so a concurrent status write is never overwritten: the next round retries.
"""

from __future__ import annotations

from karpenter.cloud.provider import CloudProviderError
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.model.node import NodeClaim
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS

INTERVAL_S = 60.0
CONDITION = "Drifted"


class DriftWatch(Controller):
    """Keeps the ``Drifted`` condition of initialized NodeClaims in step with the provider."""

    def __init__(self, ctx: ControllerContext, *, interval_s: float = INTERVAL_S) -> None:
        super().__init__(ctx, "nodeclaim.disruption")
        self.interval_s = interval_s

    async def run(self) -> None:
        """Check forever; every failure is per claim and retried next round."""
        while True:
            await self.reconcile()
            await self.clock.sleep(self.interval_s)

    async def reconcile(self) -> dict[str, str]:
        """One round; the claims whose condition changed, with the new reason ("" = cleared)."""
        changed: dict[str, str] = {}
        for claim in self.state.nodeclaims.values():
            if claim.deleting or not claim.initialized or not claim.provider_id:
                continue
            try:
                reason = await self.cloud.is_drifted(claim)
            except (CloudProviderError, OSError) as err:
                self._log.warning("drift check failed", nodeclaim=claim.name, error=str(err))
                continue
            if reason != claim.drifted and await self._record(claim, reason):
                changed[claim.name] = reason
        return changed

    async def _record(self, claim: NodeClaim, reason: str) -> bool:
        raw = self.state.nodeclaims.raw(claim.name)
        if raw is None:
            return False
        conds = codec.conditions(raw)
        if reason:
            message = f"the cloud provider reports drift: {reason}"
            codec.set_condition(conds, CONDITION, "True", reason, message, self.clock.now())
        else:
            conds = [c for c in conds if c.get("type") != CONDITION]
        patch = {
            "metadata": {"resourceVersion": codec.meta(raw).get("resourceVersion")},
            "status": {"conditions": conds},
        }
        try:
            obj = await self.kube.merge_patch(NODECLAIMS, claim.name, patch, subresource="status")
        except (errors.Conflict, errors.NotFound):
            return False
        self.state.nodeclaims.upsert(obj)
        self._log.info("drift recorded", nodeclaim=claim.name, reason=reason or "none")
        return True
