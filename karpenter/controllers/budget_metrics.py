"""Disruption-budget gauges: what each NodePool's budgets allow, and who consumes them now.

Upstream sets ``karpenter_nodepools_allowed_disruptions{nodepool,reason}`` (the minimum over the
pool's active budgets for the reason, before the nodes already disrupting are subtracted) and
``karpenter_nodepools_nodes_consuming_budgets{nodepool,reason}`` (managed, initialized nodes
being disrupted or NotReady) each time a disruption method builds its budget map. Here every
disruption pass publishes them from the pass's own survey (``core.disruption.budgets``), for
each budgeted reason; pools that are gone drop out.
"""

from __future__ import annotations

from karpenter.core.disruption import budgets
from karpenter.core.disruption.context import DisruptionPass, budget_counts
from karpenter.observability.metrics import Metrics


def publish(metrics: Metrics, ps: DisruptionPass) -> None:
    """Set both gauges from the pass ``ps`` (label sets of vanished pools are removed)."""
    rows = budgets.standings(ps.cluster.nodepools, budget_counts(ps.states), ps.now)
    allowed = metrics.nodepools_allowed_disruptions
    consuming = metrics.nodepools_nodes_consuming_budgets
    allowed.clear()
    consuming.clear()
    for row in rows:
        allowed.labels(nodepool=row.nodepool, reason=row.reason).set(row.allowed)
        consuming.labels(nodepool=row.nodepool, reason=row.reason).set(row.disrupting)
