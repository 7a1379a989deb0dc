"""Disruption-budget gauges: one disruption pass publishes upstream's two per-pool gauges."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from karpenter.controllers import budget_metrics
from karpenter.core.disruption.planner import decide
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Options
from karpenter.core.model.nodepool import Budget, Disruption
from karpenter.core.scheduling.taints import Taint
from karpenter.observability.metrics import Metrics
from tests.support import builders as b

NOW = 1_800_000_000.0


def _gauges(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name.startswith("karpenter_nodepools_") and "reason" in sample.labels:
                key = (sample.name, sample.labels["nodepool"], sample.labels["reason"])
                out[key] = sample.value
    return out


def test_pass_publishes_allowed_and_consuming_per_pool_and_reason() -> None:
    """Ten nodes with a 20% budget (drift: 1) of which one is tainted disrupted and one is
    NotReady: the pool may have 2 disrupting (1 for Drifted) and 2 consume it; a pool without
    budgets is unlimited; a pool deleted since stops being exported."""
    m4 = b.catalog()[2]
    web = b.nodepool(
        "web",
        disruption=Disruption(
            "WhenEmptyOrUnderutilized", None, (Budget("20%"), Budget("1", reasons=("Drifted",)))
        ),
    )
    free = b.nodepool("free", disruption=Disruption("WhenEmptyOrUnderutilized", None, ()))
    nodes = [b.managed_node(f"w{i}", m4, pool="web") for i in range(8)]
    nodes.append(
        b.managed_node("w8", m4, pool="web", taints=(Taint(lbl.TAINT_DISRUPTED, "NoSchedule"),))
    )
    nodes.append(b.managed_node("w9", m4, pool="web", ready=False))
    nodes.append(b.managed_node("f0", m4, pool="free"))
    metrics = Metrics()
    _, ps = decide(b.cluster((web, free), nodes=tuple(nodes)), Options(), NOW)
    budget_metrics.publish(metrics, ps)
    gauges = _gauges(metrics)
    allowed, consuming = (
        "karpenter_nodepools_allowed_disruptions",
        "karpenter_nodepools_nodes_consuming_budgets",
    )
    assert {k: v for k, v in gauges.items() if k[1] == "web"} == {
        (allowed, "web", "Empty"): 2.0,
        (allowed, "web", "Underutilized"): 2.0,
        (allowed, "web", "Drifted"): 1.0,
        (consuming, "web", "Empty"): 2.0,
        (consuming, "web", "Underutilized"): 2.0,
        (consuming, "web", "Drifted"): 2.0,
    }
    assert gauges[(allowed, "free", "Empty")] == 2**31 - 1
    assert gauges[(consuming, "free", "Empty")] == 0.0
    _, later = decide(b.cluster((web,), nodes=tuple(nodes[:10])), Options(), NOW)
    budget_metrics.publish(metrics, later)
    assert {k[1] for k in _gauges(metrics)} == {"web"}
