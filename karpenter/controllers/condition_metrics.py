"""Status-condition metrics: how many NodeClaims and NodePools hold each condition, from the mirror.

Upstream exports these through operatorpkg's status controllers under the names kept here
(``operator_nodeclaim_status_condition_count`` with the NodePool label,
``operator_nodepool_status_condition_count``, ``operator_capacitybuffer_status_condition_count``);
every replica computes them from its own mirror, like the other cluster-state metrics, so
dashboards see ``Consolidatable``, ``Drifted``, ``ConsistentStateFound``,
``NodeRegistrationHealthy`` and the buffers' ``ReadyForProvisioning`` / ``Provisioning``
without reading objects.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.model import labels as lbl
from karpenter.kube import codec
from karpenter.kube.client import Obj

INTERVAL_S = 10.0


def _count(objects: Iterable[Obj], with_pool: bool) -> Counter[tuple[str, ...]]:
    counts: Counter[tuple[str, ...]] = Counter()
    for raw in objects:
        pool = (codec.meta(raw).get("labels") or {}).get(lbl.NODEPOOL, "")
        for cond in codec.conditions(raw):
            key = (
                str(cond.get("type", "")),
                str(cond.get("status", "")),
                str(cond.get("reason", "")),
            )
            counts[(*key, str(pool)) if with_pool else key] += 1
    return counts


class ConditionMetrics(Controller):
    """Refreshes the status-condition gauges from the mirror every ``interval_s``."""

    def __init__(self, ctx: ControllerContext, *, interval_s: float = INTERVAL_S) -> None:
        super().__init__(ctx, "metrics.conditions")
        self.interval_s = interval_s

    async def run(self) -> None:
        """Refresh forever."""
        while True:
            self.refresh()
            await self.clock.sleep(self.interval_s)

    def refresh(self) -> None:
        """Recompute every gauge (label sets no longer present disappear)."""
        claims = [
            r for r in (self.state.nodeclaims.raw(n) for n in self.state.nodeclaims.entries) if r
        ]
        pools = [
            r for r in (self.state.nodepools.raw(n) for n in self.state.nodepools.entries) if r
        ]
        gauge = self.metrics.operator_nodeclaim_status_condition_count
        gauge.clear()
        for labels, n in sorted(_count(claims, True).items()):
            gauge.labels(*labels).set(n)
        pool_gauge = self.metrics.operator_nodepool_status_condition_count
        pool_gauge.clear()
        for labels, n in sorted(_count(pools, False).items()):
            pool_gauge.labels(*labels).set(n)
        store = self.state.capacity_buffers
        buffers = [r for r in (store.raw(n) for n in store.entries) if r]
        buffer_gauge = self.metrics.operator_capacitybuffer_status_condition_count
        buffer_gauge.clear()
        for labels, n in sorted(_count(buffers, False).items()):
            buffer_gauge.labels(*labels).set(n)
