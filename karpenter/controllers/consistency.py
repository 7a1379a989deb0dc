"""The consistency check: does each registered Node have the shape its NodeClaim expected?

Every ``scan_period_s`` (10 minutes, as upstream) per NodeClaim, the pure check
(``core.consistency``) compares the Node's capacity with the claim's; each issue becomes a
``FailedConsistencyCheck`` Warning Event on the NodeClaim and ``ConsistentStateFound=False``
(``ConsistencyCheckFailed``); a clean check sets ``ConsistentStateFound=True``.
"""

from __future__ import annotations

from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.consistency import node_shape_issues
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, Obj

CONDITION = "ConsistentStateFound"
SCAN_PERIOD_S = 10 * 60.0
TICK_S = 10.0


class Consistency(Controller):
    """Checks each initialized NodeClaim's Node once per scan period."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        scan_period_s: float = SCAN_PERIOD_S,
        tick_s: float = TICK_S,
    ) -> None:
        super().__init__(ctx, "nodeclaim.consistency")
        self.scan_period_s = scan_period_s
        self.tick_s = tick_s
        self.last_scanned: dict[str, float] = {}  # NodeClaim uid → when

    async def run(self) -> None:
        """Check what is due, forever."""
        while True:
            try:
                await self.reconcile()
            except (errors.ApiError, OSError) as err:
                self._log.warning("consistency pass failed", error=str(err))
            await self.clock.sleep(self.tick_s)

    async def reconcile(self) -> dict[str, list[str]]:
        """Check every claim that is due; the issues found, by NodeClaim."""
        now = self.clock.now()
        found: dict[str, list[str]] = {}
        live = set()
        for name in sorted(self.state.nodeclaims.entries):
            raw = self.state.nodeclaims.raw(name)
            claim = self.state.nodeclaims.get(name)
            if raw is None or claim is None or not claim.provider_id:
                continue
            uid = codec.uid(raw)
            live.add(uid)
            node = self.state.nodes.get(claim.node_name) if claim.node_name else None
            if node is None or now - self.last_scanned.get(uid, -1e18) < self.scan_period_s:
                continue
            self.last_scanned[uid] = now
            issues = node_shape_issues(claim, node)
            if claim.initialized and not claim.deleting:
                found[name] = issues
                await self._report(name, raw, issues)
        for uid in set(self.last_scanned) - live:
            del self.last_scanned[uid]
        return found

    async def _report(self, name: str, raw: Obj, issues: list[str]) -> None:
        for issue in issues:
            self._log.info("failed consistency check", nodeclaim=name, issue=issue)
            await self.recorder.publish(
                codec.object_reference(raw), events.WARNING, "FailedConsistencyCheck", issue
            )
        now = self.clock.now()

        def change(conds: list[Obj]) -> bool:
            if issues:
                return codec.set_condition(
                    conds,
                    CONDITION,
                    "False",
                    "ConsistencyCheckFailed",
                    "Consistency Check Failed",
                    now,
                )
            return codec.set_condition(conds, CONDITION, "True", CONDITION, "", now)

        obj = await conditions.update(self.kube, NODECLAIMS, name, change, raw=raw)
        if obj is not None:
            self.state.nodeclaims.upsert(obj)
