"""Disruption rules, table by table: budgets, blockers, costs and ranking, drift detection."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from karpenter.core.disruption import budgets as bud
from karpenter.core.disruption.candidates import (
    DRIFT_INSTANCE_TYPE,
    DRIFT_NODEPOOL,
    DRIFT_REQUIREMENTS,
    eviction_cost,
    lifetime_remaining,
    survey,
)
from karpenter.core.disruption.context import new_pass
from karpenter.core.lifecycle import nodepool_hash
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options, PodDisruptionBudget
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.nodepool import Budget, Disruption, NodePool
from karpenter.core.model.pod import Owner, SelectorTerm
from karpenter.core.provisioning.build import well_known_labels
from karpenter.core.scheduling.taints import NO_SCHEDULE, Taint
from tests.support import builders as b

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp()  # a Monday, 10:00 UTC
M4 = b.catalog()[2]
HOUR = 3600.0


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# ---- budgets ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("nodes", "total", "expected"),
    [
        ("3", 10, 3),
        ("0", 10, 0),
        ("10%", 10, 1),
        ("10%", 15, 2),  # 1.5 rounds up
        ("10%", 1, 1),  # 0.1 rounds up
        ("0%", 50, 0),
        ("100%", 7, 7),
        ("25%", 0, 0),
    ],
)
def test_budget_node_counts(nodes: str, total: int, expected: int) -> None:
    assert bud.budget_nodes(Budget(nodes=nodes), total) == expected


@pytest.mark.parametrize(
    ("schedule", "duration_h", "now", "active"),
    [
        ("0 9 * * 1-5", 8, "2026-11-23T10:00:00", True),  # Monday, inside 09:00-17:00
        ("0 9 * * 1-5", 8, "2026-11-23T16:59:59", True),
        ("0 9 * * 1-5", 8, "2026-11-23T17:00:00", False),  # the window is [09:00, 17:00)
        ("0 9 * * 1-5", 8, "2026-11-22T10:00:00", False),  # Sunday
        ("0 9 * * 1-5", 8, "2026-11-23T09:00:00", True),  # the firing instant itself
        ("@daily", 1, "2026-11-23T00:30:00", True),
        ("@daily", 1, "2026-11-23T01:30:00", False),
        ("@hourly", 0.25, "2026-11-23T10:10:00", True),
        ("@weekly", 24, "2026-11-22T12:00:00", True),  # @weekly fires Sunday 00:00
        ("@monthly", 24, "2026-11-02T00:00:01", False),
    ],
)
def test_budget_schedules_are_utc_cron_windows(
    schedule: str, duration_h: float, now: str, active: bool
) -> None:
    budget = Budget(nodes="0", schedule=schedule, duration_seconds=duration_h * HOUR)
    assert bud.budget_active(budget, _ts(now)) is active


def _pool(*budgets: Budget, **kw: object) -> NodePool:
    return b.nodepool(disruption=Disruption(budgets=tuple(budgets), **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("budgets", "reason", "expected"),
    [
        ((Budget("10%"),), "Empty", 2),
        ((Budget("5"), Budget("20%")), "Empty", 4),  # minimum of the active ones
        ((Budget("5"), Budget("0", reasons=("Drifted",))), "Empty", 5),  # reason filter
        ((Budget("5"), Budget("0", reasons=("Drifted",))), "Drifted", 0),
        ((Budget("0", schedule="0 0 * * *", duration_seconds=HOUR), Budget("3")), "Empty", 3),
        ((Budget("0", schedule="0 9 * * *", duration_seconds=2 * HOUR), Budget("3")), "Empty", 0),
        ((), "Empty", bud.UNLIMITED),  # no budget at all: no limit
    ],
)
def test_pool_limit_is_min_over_active_budgets(
    budgets: tuple[Budget, ...], reason: str, expected: int
) -> None:
    assert bud.pool_limit(_pool(*budgets), reason, 20, NOW) == expected


@pytest.mark.parametrize(
    ("budgets", "nodes", "disrupting", "expected"),
    [
        pytest.param((Budget("10%"),), 20, 0, (2, 2, 2), id="percent-of-nodes"),
        pytest.param((Budget("1"),), 5, 3, (1, 1, 1), id="allowed-not-reduced-by-disrupting"),
        pytest.param(
            (Budget("4"), Budget("0", reasons=("Drifted",))), 5, 1, (4, 0, 4), id="per-reason"
        ),
        pytest.param((), 5, 2, (bud.UNLIMITED,) * 3, id="no-budget-unlimited"),
    ],
)
def test_standings_report_raw_allowance_and_consumers(
    budgets: tuple[Budget, ...], nodes: int, disrupting: int, expected: tuple[int, int, int]
) -> None:
    """A pool's standing per reason (Empty, Drifted, Underutilized) is what its budgets allow,
    not reduced by the nodes already disrupting, which are reported beside it (upstream's
    allowed_disruptions and nodes_consuming_budgets gauges)."""
    rows = bud.standings([_pool(*budgets)], {"default": bud.PoolCount(nodes, disrupting)}, NOW)
    assert [(r.reason, r.allowed, r.disrupting) for r in rows] == [
        (reason, allowed, disrupting)
        for reason, allowed in zip(("Empty", "Drifted", "Underutilized"), expected, strict=True)
    ]


def test_deleting_and_not_ready_nodes_consume_budget() -> None:
    nodes = [b.managed_node(f"n{i}", M4) for i in range(6)]
    nodes[0] = replace(nodes[0], ready=False)
    nodes[1] = replace(nodes[1], deleting=True)
    cluster = b.cluster([_pool(Budget("3"))], nodes=tuple(nodes))
    ps = new_pass(cluster, Options(), NOW)
    assert ps.allowed("Empty", "default") == 1
    assert ps.allowed("Underutilized", "default") == 1


def test_uninitialized_nodes_neither_count_nor_consume() -> None:
    nodes = [b.managed_node(f"n{i}", M4) for i in range(4)]
    labels = {k: v for k, v in nodes[0].labels.items() if k != lbl.INITIALIZED}
    nodes[0] = replace(nodes[0], labels=labels, ready=False)
    cluster = b.cluster([_pool(Budget("50%"))], nodes=tuple(nodes))
    # 3 initialized nodes: 50% rounds up to 2; the NotReady uninitialized one is not counted.
    assert new_pass(cluster, Options(), NOW).allowed("Empty", "default") == 2


# ---- blockers ------------------------------------------------------------------------------
def _blocked_reason(cluster: Cluster, name: str) -> str:
    found = survey(cluster, NOW, well_known_labels(cluster, Options()))
    for blocked in found.blocked:
        if blocked.name == name:
            return blocked.reason
    for c in found.candidates:
        if c.name == name:
            return c.pod_blocker
    raise AssertionError(f"{name} is not managed")


def _one_node(*pods: object, pdbs: tuple[PodDisruptionBudget, ...] = (), **node_kw: Any) -> Cluster:
    node = b.managed_node("n1", M4, **node_kw)
    return b.cluster(nodes=(node,), pods=tuple(pods), pdbs=pdbs)


@pytest.mark.parametrize(
    ("annotation", "started_ago", "blocked"),
    [
        ("true", 10 * HOUR, True),
        ("5m", 60.0, True),  # still within its 5 minutes
        ("5m", 600.0, False),  # elapsed
        ("1h30m", HOUR, True),
        ("5m", None, True),  # no start time yet: counts as active
        ("false", 0.0, False),
        ("soon", 0.0, False),  # invalid values are ignored, as upstream does
        ("0s", 0.0, False),
    ],
)
def test_pod_do_not_disrupt(annotation: str, started_ago: float | None, blocked: bool) -> None:
    start = None if started_ago is None else NOW - started_ago
    pod = b.bound("n1", annotations={lbl.DO_NOT_DISRUPT: annotation}, start_time=start)
    reason = _blocked_reason(_one_node(pod), "n1")
    assert (lbl.DO_NOT_DISRUPT in reason) is blocked


def test_terminal_pods_do_not_block() -> None:
    pod = b.bound("n1", annotations={lbl.DO_NOT_DISRUPT: "true"}, phase="Succeeded")
    assert _blocked_reason(_one_node(pod), "n1") == ""


def _pdb(name: str, allowed: int, *, always: bool = False, **labels: str) -> PodDisruptionBudget:
    return PodDisruptionBudget("default", name, b.selector(**labels), allowed, always)


@pytest.mark.parametrize(
    ("pdbs", "ready", "fragment"),
    [
        ((_pdb("db", 0, app="db"),), True, "PodDisruptionBudget default/db prevents"),
        ((_pdb("db", 1, app="db"),), True, ""),
        ((_pdb("other", 0, app="web"),), True, ""),  # selects other pods
        ((_pdb("a", 1, app="db"), _pdb("b", 1, tier="data")), True, "more than one"),
        ((_pdb("db", 0, always=True, app="db"),), False, ""),  # AlwaysAllow, pod unhealthy
        ((_pdb("db", 0, always=True, app="db"),), True, "prevents"),  # healthy pods still count
    ],
)
def test_pdbs(pdbs: tuple[PodDisruptionBudget, ...], ready: bool, fragment: str) -> None:
    pod = b.bound("n1", labels={"app": "db", "tier": "data"}, ready=ready)
    reason = _blocked_reason(_one_node(pod, pdbs=pdbs), "n1")
    assert (fragment in reason) if fragment else reason == ""


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"annotations": {lbl.DO_NOT_DISRUPT: "true"}}, "DoNotDisrupt"),
        ({"deleting": True}, "Deleting"),
        ({"taints": (Taint(lbl.TAINT_DISRUPTED, NO_SCHEDULE),)}, "Disrupting"),
    ],
)
def test_node_level_blockers(change: dict[str, Any], fragment: str) -> None:
    assert _blocked_reason(_one_node(**change), "n1").startswith(fragment)


def test_node_do_not_disrupt_other_values_do_not_block() -> None:
    assert _blocked_reason(_one_node(annotations={lbl.DO_NOT_DISRUPT: "5m"}), "n1") == ""


def test_uninitialized_and_nominated_nodes_are_not_candidates() -> None:
    node = b.managed_node("n1", M4)
    fresh = replace(node, labels={k: v for k, v in node.labels.items() if k != lbl.INITIALIZED})
    assert _blocked_reason(b.cluster(nodes=(fresh,)), "n1").startswith("NotInitialized")
    waiting = b.pod(nominated_node_name="n1")
    cluster = b.cluster(nodes=(node,), pods=(waiting,))
    assert _blocked_reason(cluster, "n1").startswith("Nominated")


def test_unmanaged_nodes_are_ignored() -> None:
    cluster = b.cluster(nodes=(b.node("plain"),))
    found = survey(cluster, NOW, well_known_labels(cluster, Options()))
    assert found.candidates == [] and found.blocked == []


# ---- costs and ranking ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("deletion_cost", "priority", "expected"),
    [
        (None, 0, 1.0),
        ("134217728", 0, 2.0),  # 2^27
        ("-134217728", 0, 0.0),
        (None, 2**25, 2.0),
        (None, 2_000_000_000, 10.0),  # clamped
        ("-99999999999", 0, -10.0),
        ("not-a-number", 0, 1.0),
    ],
)
def test_eviction_cost(deletion_cost: str | None, priority: int, expected: float) -> None:
    annotations = {} if deletion_cost is None else {lbl.POD_DELETION_COST: deletion_cost}
    pod = b.bound("n1", annotations=annotations, priority=priority)
    assert eviction_cost(pod) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("age_h", "expire_h", "expected"),
    [(0, 10, 1.0), (5, 10, 0.5), (10, 10, 0.0), (20, 10, 0.0), (5, None, 1.0)],
)
def test_lifetime_remaining(age_h: float, expire_h: float | None, expected: float) -> None:
    expire = None if expire_h is None else expire_h * HOUR
    assert lifetime_remaining(NOW - age_h * HOUR, expire, NOW) == pytest.approx(expected)


def test_candidates_rank_by_price_per_disruption_cost() -> None:
    m8 = b.catalog()[3]
    nodes = (
        b.managed_node("cheap-busy", M4),
        b.managed_node("dear-busy", m8),
        b.managed_node("dear-idle", m8),
    )
    pods = (
        b.bound("cheap-busy", cpu="100m"),
        b.bound("cheap-busy", cpu="100m"),
        b.bound("dear-busy", cpu="100m"),
        b.bound("dear-busy", cpu="100m"),
        b.bound("dear-busy", cpu="100m", priority=2**26),
        b.bound("dear-idle", cpu="100m"),
    )
    cluster = b.cluster(nodes=nodes, pods=pods)
    found = survey(cluster, NOW, well_known_labels(cluster, Options()))
    by_name = {c.name: c for c in found.candidates}
    assert by_name["dear-idle"].reschedule_cost == 2.0
    assert by_name["dear-busy"].reschedule_cost == 1.0 + 1.0 + 1.0 + 3.0
    ranked = sorted(found.candidates, key=lambda c: -c.savings_ratio)
    assert [c.name for c in ranked] == ["dear-idle", "cheap-busy", "dear-busy"]


def test_daemonset_pods_and_negative_cost_pods_leave_a_node_empty() -> None:
    ds_pod = b.bound("n1", owners=(Owner("DaemonSet", "logs"),))
    cheap = b.bound("n1", annotations={lbl.POD_DELETION_COST: "-999999999999"})
    cluster = _one_node(ds_pod, cheap)
    found = survey(cluster, NOW, well_known_labels(cluster, Options()))
    assert found.candidates[0].empty


# ---- drift ---------------------------------------------------------------------------------
def _drift(cluster: Cluster, now: float = NOW) -> dict[str, str]:
    found = survey(cluster, now, well_known_labels(cluster, Options()))
    return {c.name: c.drift for c in found.candidates}


def _hashed(pool: NodePool, value: str | None = None, version: str = "v3") -> dict[str, str]:
    return {
        lbl.NODEPOOL_HASH: value if value is not None else nodepool_hash(pool),
        lbl.NODEPOOL_HASH_VERSION: version,
    }


def test_static_drift_compares_template_hashes() -> None:
    pool = b.nodepool(labels={"team": "web"})
    old = b.nodepool(labels={"team": "api"})
    nodes = (
        b.managed_node("same", M4, annotations=_hashed(pool), creation=NOW),
        b.managed_node("older", M4, annotations=_hashed(old), creation=NOW),
        b.managed_node("other-version", M4, annotations=_hashed(old, version="v2"), creation=NOW),
        b.managed_node("unhashed", M4, creation=NOW),
    )
    drift = _drift(b.cluster([pool], nodes=nodes))
    assert drift == {"same": "", "older": DRIFT_NODEPOOL, "other-version": "", "unhashed": ""}


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({"labels": {"team": "web"}}, False),
        ({"taints": (Taint("gpu", NO_SCHEDULE),)}, False),
        ({"expire_after": 24 * HOUR}, False),
        ({"requirements": b.term(("kubernetes.io/arch", "In", ["arm64"]))}, True),
    ],
)
def test_hash_covers_the_template_but_not_requirements(change: dict[str, Any], same: bool) -> None:
    assert (nodepool_hash(b.nodepool(**change)) == nodepool_hash(b.nodepool())) is same


def test_hash_ignores_taint_order() -> None:
    t1, t2 = Taint("a", NO_SCHEDULE), Taint("b", NO_SCHEDULE, "x")
    assert nodepool_hash(b.nodepool(taints=(t1, t2))) == nodepool_hash(b.nodepool(taints=(t2, t1)))


@pytest.mark.parametrize(
    ("requirements", "drifted"),
    [
        (b.term((lbl.CAPACITY_TYPE, "In", ["on-demand"])), False),
        (b.term((lbl.CAPACITY_TYPE, "In", ["spot"])), True),
        (b.term(("team", "In", ["web"])), True),  # a custom label the node lacks
        (b.term(("team", "NotIn", ["web"])), False),
        (b.term((lbl.REGION, "In", ["us-west-2"])), True),  # well-known labels are not exempt
        (b.term(("kubernetes.io/arch", "In", ["amd64", "arm64"])), False),
    ],
)
def test_requirements_drift(requirements: SelectorTerm, drifted: bool) -> None:
    pool = b.nodepool(requirements=requirements)
    cluster = b.cluster([pool], nodes=(b.managed_node("n1", M4, creation=NOW),))
    assert _drift(cluster)["n1"] == (DRIFT_REQUIREMENTS if drifted else "")


@pytest.mark.parametrize(
    ("type_name", "zone", "age_h", "drifted"),
    [
        ("gone", "zone-a", 2, True),
        ("gone", "zone-a", 0.5, False),  # too young to judge
        ("m-4x", "zone-z", 2, True),  # type exists but not in that zone any more
        ("m-4x", "zone-a", 2, False),
    ],
)
def test_instance_type_drift(type_name: str, zone: str, age_h: float, drifted: bool) -> None:
    it = replace(M4, name=type_name)
    node = b.managed_node("n1", it, zone=zone, creation=NOW - age_h * HOUR)
    assert _drift(b.cluster(nodes=(node,)))["n1"] == (DRIFT_INSTANCE_TYPE if drifted else "")


def test_drift_reads_nodeclaim_annotations_too() -> None:
    pool = b.nodepool()
    node = b.managed_node("n1", M4, creation=NOW)
    claim = NodeClaim(
        "default-abc",
        nodepool="default",
        provider_id=node.provider_id,
        annotations=_hashed(pool, "0000"),
        launched=True,
        registered=True,
        initialized=True,
        creation=NOW,
    )
    assert _drift(b.cluster([pool], nodes=(node,), nodeclaims=(claim,))) == {"n1": DRIFT_NODEPOOL}
