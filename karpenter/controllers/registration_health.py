"""NodePool ``NodeRegistrationHealthy``: do this NodePool's launches turn into registered nodes?

The window and its thresholds are the pure core's (``core.registration``); this module keeps one
window per NodePool (by uid), feeds it the lifecycle controller's outcomes (``observe``: a
registration, or a launch / registration timeout) and writes the condition when the core says
it flips. ``reconcile`` resets a NodePool to ``Unknown`` (window emptied) when its generation
moved past the condition's ``observedGeneration``, or its NodeClass's generation moved past
``status.nodeClassObservedGeneration``, as upstream does when either is edited (the provider
tells the NodeClass generation; the simulated cloud has no NodeClass objects, so there only
NodePool edits count); after a restart a window is seeded from the stored condition.
"""

from __future__ import annotations

from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core import registration
from karpenter.core.model.node import NodeClaim
from karpenter.kube import codec, errors
from karpenter.kube.client import NODEPOOLS, Obj

CONDITION = "NodeRegistrationHealthy"
INTERVAL_S = 5.0


class RegistrationHealth(Controller):
    """Per-NodePool registration windows and the condition they drive."""

    def __init__(self, ctx: ControllerContext, *, interval_s: float = INTERVAL_S) -> None:
        super().__init__(ctx, "nodepool.registrationhealth")
        self.interval_s = interval_s
        self.windows: dict[str, registration.History] = {}  # NodePool uid → outcomes
        # NodePool uid → the status a write in flight is setting. A burst of registrations
        # observes concurrently: without this, every observer reads the stored condition
        # before the first write lands and writes the same flip (66 NodePool write attempts for
        # one flip in a 140-node burst, each on the controller's QPS, most a 409 and a re-read).
        self._writing: dict[str, str] = {}

    async def observe(
        self, claim: NodeClaim, owners: list[Obj], registered: bool, reason: str, message: str
    ) -> None:
        """Count one outcome of ``claim`` (owned by its NodePool) and flip the condition."""
        raw = self.state.nodepools.raw(claim.nodepool)
        if raw is None:
            return
        uid = codec.uid(raw)
        if not any(o.get("kind") == "NodePool" and o.get("uid") == uid for o in owners):
            return  # a claim the NodePool does not own (static or foreign) says nothing of it
        current = codec.condition(raw, CONDITION)
        stored = current.get("status") if current is not None else None
        window = self.windows.get(uid) or registration.seeded(stored)
        flip = registration.transition(window, registered, self._writing.get(uid, stored))
        self.windows[uid] = window.record(registered)
        if flip is None:
            return
        if flip == registration.TRUE:
            reason, message = CONDITION, ""
        self._writing[uid] = flip
        try:
            await self._write(claim.nodepool, raw, flip, reason, message)
        finally:
            # written (the mirror now shows it) or failed (the next outcome tries again)
            if self._writing.get(uid) == flip:
                del self._writing[uid]
        self._log.info("registration health", nodepool=claim.nodepool, status=flip, reason=reason)

    async def run(self) -> None:
        """Reset edited NodePools forever."""
        while True:
            try:
                await self.reconcile()
            except (errors.ApiError, OSError) as err:
                self._log.warning("registration health pass failed", error=str(err))
            await self.clock.sleep(self.interval_s)

    async def reconcile(self) -> list[str]:
        """Set ``Unknown`` (and empty the window) where the NodePool or its NodeClass changed;
        the pools reset."""
        reset = []
        for name in sorted(self.state.nodepools.entries):
            raw = self.state.nodepools.raw(name)
            pool = self.state.nodepools.get(name)
            if raw is None or pool is None or codec.meta(raw).get("deletionTimestamp"):
                continue
            cond = codec.condition(raw, CONDITION)
            observed = (raw.get("status") or {}).get("nodeClassObservedGeneration")
            class_generation = self.ctx.node_class_generation(pool.template.node_class_ref)
            if not registration.needs_reset(
                None if cond is None else cond.get("observedGeneration"),
                codec.meta(raw).get("generation"),
                observed,
                class_generation,
            ):
                continue
            self.windows.pop(codec.uid(raw), None)
            await self._write(
                name, raw, registration.UNKNOWN, "AwaitingReconciliation", "", class_generation
            )
            reset.append(name)
        return reset

    async def _write(
        self,
        pool: str,
        raw: Obj,
        status: str,
        reason: str,
        message: str,
        class_generation: int | None = None,
    ) -> None:
        now = self.clock.now()
        generation = codec.meta(raw).get("generation")
        fields = (
            {} if class_generation is None else {"nodeClassObservedGeneration": class_generation}
        )

        def change(conds: list[Obj]) -> bool:
            changed = codec.set_condition(conds, CONDITION, status, reason, message, now)
            for cond in conds:
                if cond.get("type") == CONDITION and cond.get("observedGeneration") != generation:
                    cond["observedGeneration"] = generation
                    changed = True
            return changed

        obj = await conditions.update(self.kube, NODEPOOLS, pool, change, raw=raw, status=fields)
        if obj is not None:
            self.state.nodepools.upsert(obj)
