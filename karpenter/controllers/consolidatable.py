"""NodeClaim ``Consolidatable``: set once ``consolidateAfter`` has elapsed since the last pod event.

The verdict is the pure core's (``core.consolidatable``); this loop writes it. It looks at every
NodeClaim each ``interval_s`` and sooner when a claim's window is about to close, writes only
what changed, and never clobbers another writer's condition (``controllers.conditions``). The
disruption core still decides on its own snapshot; the condition is what users and dashboards
see (``operator_nodeclaim_status_condition_count``).
"""

from __future__ import annotations

from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.consolidatable import consolidatable
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS, Obj

CONDITION = "Consolidatable"
INTERVAL_S = 10.0


class ConsolidatableWatch(Controller):
    """Keeps every NodeClaim's ``Consolidatable`` condition in step with its NodePool."""

    def __init__(self, ctx: ControllerContext, *, interval_s: float = INTERVAL_S) -> None:
        super().__init__(ctx, "nodeclaim.consolidatable")
        self.interval_s = interval_s

    async def run(self) -> None:
        """Reconcile forever, waking early for the next window that closes."""
        while True:
            try:
                wake = await self.reconcile()
            except (errors.ApiError, OSError) as err:
                self._log.warning("consolidatable pass failed", error=str(err))
                wake = None
            delay = self.interval_s
            if wake is not None:
                delay = min(delay, max(wake - self.clock.now(), 0.1))
            await self.clock.sleep(delay)

    async def reconcile(self) -> float | None:
        """One pass; the earliest time a window closes (None: none pending)."""
        now = self.clock.now()
        wake: float | None = None
        for name in sorted(self.state.nodeclaims.entries):
            claim = self.state.nodeclaims.get(name)
            raw = self.state.nodeclaims.raw(name)
            if claim is None or raw is None or claim.deleting:
                continue
            pool = self.state.nodepools.get(claim.nodepool)
            if pool is None:
                continue
            verdict = consolidatable(claim, pool, now)
            if verdict.recheck_at is not None:
                wake = verdict.recheck_at if wake is None else min(wake, verdict.recheck_at)
            present = codec.condition(raw, CONDITION) is not None
            if verdict.consolidatable != present or (
                verdict.consolidatable and not codec.condition_true(raw, CONDITION)
            ):
                await self._write(name, raw, verdict.consolidatable, verdict.why)
        return wake

    async def _write(self, name: str, raw: Obj, on: bool, why: str) -> None:
        now = self.clock.now()

        def change(conds: list[Obj]) -> bool:
            if on:
                return codec.set_condition(conds, CONDITION, "True", CONDITION, "", now)
            kept = [c for c in conds if c.get("type") != CONDITION]
            changed = len(kept) != len(conds)
            conds[:] = kept
            return changed

        obj = await conditions.update(self.kube, NODECLAIMS, name, change, raw=raw)
        if obj is not None:
            self.state.nodeclaims.upsert(obj)
            self._log.debug("consolidatable", nodeclaim=name, consolidatable=on, reason=why)
