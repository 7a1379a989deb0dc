"""Node repair (feature gate ``NodeRepair``): replace nodes the cloud provider calls unhealthy.

The decision is the core's (``core/repair.py``: the provider's repair policies, their
tolerations, the 20%-of-the-pool guard). This loop feeds it the managed Nodes from the mirror
every ``interval_s`` (sooner when a toleration runs out), and for each repair due it stamps the
NodeClaim's ``karpenter.sh/nodeclaim-termination-timestamp`` with now (the drain then deletes
pods at once instead of waiting on PDBs: the node is broken) and deletes the NodeClaim. A repair
the guard holds back gets a ``NodeRepairBlocked`` event and is looked at again in 5 minutes.
"""

from __future__ import annotations

import anyio

from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core import repair
from karpenter.core.model import labels as lbl
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, Obj

INTERVAL_S = 30.0
BLOCKED_RETRY_S = 300.0


class NodeHealth(Controller):
    """Repairs unhealthy managed nodes within the provider's policies (leader only)."""

    def __init__(self, ctx: ControllerContext, *, interval_s: float = INTERVAL_S) -> None:
        super().__init__(ctx, "node.health")
        self.interval_s = interval_s
        self.repaired: list[str] = []  # NodeClaims deleted for repair, newest last (bounded)
        self._blocked_at: dict[str, float] = {}  # node → when its NodeRepairBlocked was posted
        self._changed = anyio.Event()

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "Node":
            self._changed.set()  # a condition may have started its toleration

    async def run(self) -> None:
        """Check forever: on Node changes, when a toleration runs out, and every interval."""
        self.state.subscribe(self._on_change)
        while True:
            self._changed = anyio.Event()
            try:
                wait = await self.reconcile()
            except (errors.ApiError, OSError) as err:
                self._log.warning("node health pass failed", error=str(err))
                wait = self.interval_s
            with anyio.move_on_after(min(wait, self.interval_s)):
                await self._changed.wait()
            await self.clock.sleep(0)  # let a burst of Node events land before looking

    def _nodes(self) -> list[repair.NodeHealth]:
        out = []
        for name, entry in sorted(self.state.nodes.entries.items()):
            names = self.state.claims_of_node(name)
            claim = self.state.nodeclaims.get(names[0]) if names else None
            if claim is None or claim.deleting or codec.meta(entry.raw).get("deletionTimestamp"):
                continue  # unmanaged, or already going
            conditions = tuple(
                repair.Condition(
                    str(c.get("type", "")),
                    str(c.get("status", "")),
                    codec.parse_time(c.get("lastTransitionTime")),
                )
                for c in codec.conditions(entry.raw)
            )
            out.append(repair.NodeHealth(name, claim.name, claim.nodepool, conditions))
        return out

    async def reconcile(self) -> float:
        """One pass; seconds until the next one is needed."""
        policies = self.cloud.repair_policies()
        now = self.clock.now()
        decisions = repair.decide(self._nodes(), policies, now)
        held = {d.node.node for d in decisions if d.blocked}
        for node in [n for n in self._blocked_at if n not in held]:
            del self._blocked_at[node]
        for d in decisions:
            if d.blocked and now - self._blocked_at.get(d.node.node, -BLOCKED_RETRY_S) >= (
                BLOCKED_RETRY_S
            ):
                self._blocked_at[d.node.node] = now
                await self._blocked(d)
        for d in repair.due_now(decisions, now):
            await self._repair(d, now)
        wait = repair.next_check(decisions, now, BLOCKED_RETRY_S)
        return self.interval_s if wait is None else max(wait, 1.0)

    async def _repair(self, d: repair.Decision, now: float) -> None:
        claim = self.state.nodeclaims.get(d.node.claim)
        raw = self.state.nodeclaims.raw(d.node.claim)
        if claim is None or raw is None:
            return
        condition = f"{d.policy.condition_type}={d.policy.condition_status}"
        self._log.info(
            "repairing unhealthy node", node=d.node.node, nodeclaim=claim.name, condition=condition
        )
        stamp = {"metadata": {"annotations": {lbl.TERMINATION_TIMESTAMP: codec.rfc3339(now)}}}
        try:
            await self.kube.merge_patch(NODECLAIMS, claim.name, stamp)
            await self.kube.delete(NODECLAIMS, claim.name)
        except errors.NotFound:
            return
        await self._event(raw, events.WARNING, "NodeRepair", f"Repairing node: {condition}")
        self.metrics.nodeclaims_unhealthy_disrupted.labels(
            condition=d.policy.condition_type,
            nodepool=claim.nodepool,
            capacity_type=claim.labels.get(lbl.CAPACITY_TYPE, ""),
            image_id=claim.image_id,
        ).inc()
        self.repaired.append(claim.name)
        del self.repaired[:-100]

    async def _blocked(self, d: repair.Decision) -> None:
        raw = self.state.nodes.raw(d.node.node)
        if raw is None:
            return
        scope = f"NodePool {d.node.nodepool}" if d.node.nodepool else "the cluster"
        await self._event(
            raw,
            events.WARNING,
            "NodeRepairBlocked",
            f"more than {int(repair.MAX_UNHEALTHY_FRACTION * 100)}% of {scope} is unhealthy",
        )

    async def _event(self, raw: Obj, kind: str, reason: str, message: str) -> None:
        await self.recorder.publish(codec.object_reference(raw), kind, reason, message)
