"""Disruption methods and the planner: what each method decides on small, readable clusters.

Catalog (tests.support.builders.catalog): m-1x/2x/4x/8x/16x with 1..16 CPU at 0.09, 0.18,
0.36, 0.72, 1.44 USD/h on-demand and half that on spot, in zone-a/b/c; 100m CPU overhead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from karpenter.core.disruption.commands import Command
from karpenter.core.disruption.planner import decide, plan
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options, PodDisruptionBudget
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node
from karpenter.core.model.nodepool import (
    BALANCED,
    WHEN_EMPTY,
    Budget,
    Disruption,
    NodePool,
)
from karpenter.core.model.pod import Pod
from tests.support import builders as b

NOW = 1_800_000_000.0
HOUR = 3600.0
M1, M2, M4, M8, M16 = b.catalog()
ON_DEMAND = b.term((lbl.CAPACITY_TYPE, "In", ["on-demand"]))


def _pool(
    name: str = "default",
    *,
    policy: str = "WhenEmptyOrUnderutilized",
    after: float | None = 0.0,
    budgets: tuple[Budget, ...] = (Budget("100%"),),
    **kw: Any,
) -> NodePool:
    kw.setdefault("requirements", ON_DEMAND)
    return b.nodepool(name, disruption=Disruption(policy, after, budgets), **kw)


def _node(name: str, it: InstanceType, **kw: Any) -> Node:
    kw.setdefault("creation", NOW - HOUR)
    return b.managed_node(name, it, **kw)


def _cluster(
    pools: tuple[NodePool, ...], nodes: tuple[Node, ...], pods: tuple[Pod, ...], **kw: Any
) -> Cluster:
    return b.cluster(pools, nodes=nodes, pods=pods, **kw)


DEFAULTS = Options()
Summary = list[tuple[str, tuple[str, ...], tuple[str, ...]]]


def _first(cluster: Cluster, options: Options = DEFAULTS) -> Command | None:
    command, _ = decide(cluster, options, NOW, assume_consolidate_after_elapsed=True)
    return command


def _summary(cluster: Cluster, options: Options = DEFAULTS) -> Summary:
    result = plan(cluster, options, NOW)
    return [
        (
            s.command.reason,
            s.command.names,
            tuple(r.launch.instance_type for r in s.command.replacements),
        )
        for s in result.steps
    ]


# ---- emptiness -------------------------------------------------------------------------------
def test_empty_nodes_go_in_one_command() -> None:
    nodes = (_node("e1", M4), _node("e2", M4), _node("busy", M1))
    pods = (b.bound("busy", cpu="800m"),)
    command = _first(_cluster((_pool(),), nodes, pods))
    assert command is not None
    assert (command.reason, command.method, command.names) == ("Empty", "emptiness", ("e1", "e2"))
    assert command.replacements == ()


def test_emptiness_respects_the_budget_and_continues_after_each_command() -> None:
    nodes = (_node("e1", M4), _node("e2", M8), _node("busy", M1))
    pods = (b.bound("busy", cpu="800m"),)
    cluster = _cluster((_pool(budgets=(Budget("1"),)),), nodes, pods)
    # The dearer empty node ranks first; each command completes before the next.
    assert _summary(cluster) == [("Empty", ("e2",), ()), ("Empty", ("e1",), ())]


@pytest.mark.parametrize(
    ("policy", "after", "acts"),
    [
        ("WhenEmpty", 0.0, True),
        ("WhenEmptyOrUnderutilized", 0.0, True),
        (BALANCED, 0.0, True),
        ("WhenEmptyOrUnderutilized", None, False),  # consolidateAfter: Never
    ],
)
def test_emptiness_applies_to_every_policy_unless_never(
    policy: str, after: float | None, acts: bool
) -> None:
    cluster = _cluster((_pool(policy=policy, after=after),), (_node("e1", M4),), ())
    command = _first(cluster)
    assert (command is not None and command.reason == "Empty") is acts


def test_consolidate_after_is_counted_from_the_last_pod_event_in_the_controller() -> None:
    cluster = _cluster((_pool(after=600.0),), (_node("e1", M4, creation=NOW - 60.0),), ())
    waiting, _ = decide(cluster, Options(), NOW)
    elapsed, _ = decide(cluster, Options(), NOW + 600.0)
    assert waiting is None
    assert elapsed is not None and elapsed.reason == "Empty"


def test_static_pools_are_neither_emptied_nor_consolidated() -> None:
    """A NodePool with replicas keeps its nodes: empty or underused, the static controller owns
    their count (drift still applies)."""
    static = _pool(replicas=2)
    nodes = (_node("e1", M4), _node("u1", M4))
    pods = (b.bound("u1", "p1", cpu="100m"),)
    assert _first(_cluster((static,), nodes, pods)) is None
    dynamic = _first(_cluster((_pool(),), nodes, pods))
    assert dynamic is not None and dynamic.reason == "Empty"


# ---- consolidation ---------------------------------------------------------------------------
def test_delete_when_pods_fit_on_other_nodes() -> None:
    nodes = (_node("a", M4), _node("b", M4))
    pods = (b.bound("a", "p1"), b.bound("b", "p2"))
    command = _first(_cluster((_pool(),), nodes, pods))
    assert command is not None
    # Merging both onto one new m-4x would be the same type as a candidate, not cheaper than
    # keeping one: multi-node declines, single-node deletes the first-ranked node.
    assert (command.reason, command.method, command.names) == ("Underutilized", "single", ("a",))
    assert command.moves == (("default/p1", "b"),)
    assert command.savings == pytest.approx(0.36)


def test_replace_with_one_strictly_cheaper_node() -> None:
    cluster = _cluster((_pool(),), (_node("big", M8),), (b.bound("big", "p", cpu="1"),))
    command = _first(cluster)
    assert command is not None and command.method == "single"
    (replacement,) = command.replacements
    assert replacement.launch.instance_type == "m-2x"
    assert [it.name for it in replacement.instance_types] == ["m-2x", "m-4x"]
    assert command.savings == pytest.approx(0.72 - 0.18)
    assert command.moves == (("default/p", "replacement:0"),)


def test_no_command_when_no_cheaper_type_fits() -> None:
    cluster = _cluster((_pool(),), (_node("n", M2),), (b.bound("n", cpu="1500m"),))
    result = plan(cluster, Options(), NOW)
    assert result.steps == ()
    assert [b_.reason.split(":")[0] for b_ in result.blocked] == ["NotCheaper"]


def test_never_one_node_for_many() -> None:
    # Two pods that refuse to share a host, on an overpriced node: removing it needs two new
    # nodes, which would be cheaper in total, but upstream's consolidation never replaces one
    # with many (CONSOLIDATION_MAX_REPLACEMENTS=1, or COST_POLICY=firstfit, keeps that rule).
    dear = b.instance_type("x-16x", 16, 64, price=5.0)
    spread = b.affinity_term(lbl.HOSTNAME, app="solo")
    pods = tuple(
        b.bound("huge", cpu="3", labels={"app": "solo"}, required_anti_affinity=(spread,))
        for _ in range(2)
    )
    types = (*b.catalog(), dear)
    cluster = b.cluster((_pool(),), types, nodes=(_node("huge", dear),), pods=pods)
    result = plan(cluster, Options(max_replacements=1), NOW)
    assert result.steps == ()
    assert "can't remove without creating 2" in result.blocked[0].reason


def test_one_node_splits_into_two_cheaper_ones() -> None:
    """By default the overpriced node of two host-exclusive pods is replaced by two cheaper
    nodes, one pod each, in one command."""
    dear = b.instance_type("x-16x", 16, 64, price=5.0)
    spread = b.affinity_term(lbl.HOSTNAME, app="solo")
    pods = tuple(
        b.bound("huge", cpu="3", labels={"app": "solo"}, required_anti_affinity=(spread,))
        for _ in range(2)
    )
    types = (*b.catalog(), dear)
    cluster = b.cluster((_pool(),), types, nodes=(_node("huge", dear),), pods=pods)
    result = plan(cluster, Options(), NOW)
    assert len(result.steps) == 1
    command = result.steps[0].command
    assert command.names == ("huge",) and len(command.replacements) == 2
    assert sorted(to for _, to in command.moves) == ["replacement:0", "replacement:1"]
    assert command.price_added < 5.0
    assert result.price_after < result.price_before


def test_when_empty_policy_leaves_underutilized_nodes() -> None:
    cluster = _cluster((_pool(policy=WHEN_EMPTY),), (_node("big", M8),), (b.bound("big"),))
    result = plan(cluster, Options(), NOW)
    assert result.steps == ()
    assert "consolidation policy WhenEmpty, but node is not empty" in result.blocked[0].reason


def test_multi_node_consolidation_merges_several_nodes_into_one() -> None:
    nodes = tuple(_node(f"n{i}", M4) for i in range(4))
    pods = tuple(b.bound(f"n{i}", f"p{i}", cpu="900m") for i in range(4))
    command = _first(_cluster((_pool(),), nodes, pods))
    assert command is not None and command.method == "multi"
    # Three nodes' pods fit in the fourth's spare room: deleting three beats replacing four
    # with one m-4x (a candidate's own type, which multi-node consolidation refuses).
    assert command.names == ("n0", "n1", "n2")
    assert command.replacements == ()
    assert {to for _, to in command.moves} == {"n3"}
    assert command.savings == pytest.approx(3 * 0.36)


def test_multi_node_consolidation_replaces_several_nodes_with_one_cheaper_type() -> None:
    nodes = tuple(_node(f"n{i}", M8) for i in range(3))
    pods = tuple(b.bound(f"n{i}", f"p{i}", cpu="3") for i in range(3))
    command = _first(_cluster((_pool(),), nodes, pods))
    assert command is not None and command.method == "multi"
    assert command.names == ("n0", "n1", "n2")
    (replacement,) = command.replacements
    assert replacement.launch.instance_type == "m-16x"  # 9 CPU of pods on one node
    assert command.savings == pytest.approx(3 * 0.72 - 1.44)


def test_do_not_disrupt_and_pdbs_keep_a_node_out_of_consolidation() -> None:
    nodes = (_node("a", M8), _node("b", M8))
    pods = (
        b.bound("a", "guarded", annotations={lbl.DO_NOT_DISRUPT: "true"}),
        b.bound("b", "db", labels={"app": "db"}),
    )
    pdb = PodDisruptionBudget("default", "db", b.selector(app="db"), 0)
    result = plan(_cluster((_pool(),), nodes, pods, pdbs=(pdb,)), Options(), NOW)
    assert result.steps == ()
    reasons = {x.name: x.reason for x in result.blocked}
    assert reasons["a"].startswith("PodBlocked: pod default/guarded")
    assert reasons["b"].startswith("PodBlocked: PodDisruptionBudget default/db")


def test_consolidation_budget_zero_blocks_underutilized_only() -> None:
    budgets = (Budget("0", reasons=("Underutilized",)), Budget("100%"))
    nodes = (_node("big", M8), _node("empty", M4))
    cluster = _cluster((_pool(budgets=budgets),), nodes, (b.bound("big"),))
    assert _summary(cluster) == [("Empty", ("empty",), ())]


# ---- capacity types --------------------------------------------------------------------------
def test_on_demand_to_spot_replacement_is_pinned_to_spot() -> None:
    pool = _pool(requirements=())  # spot and on-demand allowed
    cluster = _cluster((pool,), (_node("od", M8),), (b.bound("od", cpu="1"),))
    command = _first(cluster)
    assert command is not None
    (replacement,) = command.replacements
    assert replacement.launch.capacity_type == "spot"
    assert replacement.requirements[lbl.CAPACITY_TYPE].values == frozenset({"spot"})
    assert replacement.launch.price == pytest.approx(0.09)


def _many_spot_types(n: int) -> tuple[InstanceType, ...]:
    spot: dict[str, Any] = {"capacity_types": ("spot",), "spot_discount": 1.0}
    small = [b.instance_type(f"s-{i:02d}", 2, 8, price=0.10 + i * 0.01, **spot) for i in range(n)]
    return (*small, b.instance_type("s-big", 8, 32, price=1.0, **spot))


@pytest.mark.parametrize(
    ("gate", "cheaper_types", "outcome"),
    [
        (False, 20, "SpotToSpotConsolidation is disabled"),
        (True, 10, "requires 15 cheaper instance type options"),
        (True, 20, "replace"),
    ],
)
def test_spot_to_spot_single_node(gate: bool, cheaper_types: int, outcome: str) -> None:
    types = _many_spot_types(cheaper_types)
    big = types[-1]
    pool = _pool(requirements=b.term((lbl.CAPACITY_TYPE, "In", ["spot"])))
    node = _node("spot", big, capacity_type="spot")
    cluster = b.cluster((pool,), types, nodes=(node,), pods=(b.bound("spot", cpu="1"),))
    options = Options(spot_to_spot_consolidation=gate)
    result = plan(cluster, options, NOW)
    if outcome == "replace":
        (step,) = result.steps
        (replacement,) = step.command.replacements
        assert len(replacement.instance_types) == 15  # truncated to the 15 cheapest
        assert replacement.launch.instance_type == "s-00"
    else:
        assert result.steps == ()
        assert outcome in result.blocked[0].reason


# ---- balanced --------------------------------------------------------------------------------
def test_balanced_rejects_moves_that_disrupt_more_than_they_save() -> None:
    # Replacing an m-2x holding a 1 CPU pod by... nothing cheaper fits, so look at a pool of
    # eight busy nodes where one node saves little: m-4x with 2.5 CPU -> m-4x impossible, so
    # the only move is deleting a lightly used node whose pods are many (high disruption).
    nodes = (*(_node(f"busy{i}", M4) for i in range(3)), _node("light", M2))
    pods = (
        *(b.bound(f"busy{i}", f"w{i}", cpu="3") for i in range(3)),
        *(b.bound("light", f"x{i}", cpu="100m", priority=2**27) for i in range(5)),
    )
    balanced = _cluster((_pool(policy=BALANCED),), nodes, pods)
    eager = _cluster((_pool(),), nodes, pods)
    assert _summary(eager) == [("Underutilized", ("light",), ())]
    result = plan(balanced, Options(), NOW)
    assert result.steps == ()
    assert "Balanced: NodePool default score" in {x.name: x.reason for x in result.blocked}["light"]


def test_balanced_approves_an_empty_like_cheap_move() -> None:
    nodes = (_node("a", M8), _node("b", M8))
    pods = (*(b.bound("a", cpu="2") for _ in range(3)), b.bound("b", cpu="200m"))
    assert _summary(_cluster((_pool(policy=BALANCED),), nodes, pods)) == [
        ("Underutilized", ("b",), ())
    ]


# ---- drift -----------------------------------------------------------------------------------
def test_drifted_nodes_are_replaced_one_by_one_within_budget() -> None:
    pool = _pool(budgets=(Budget("1", reasons=("Drifted",)), Budget("100%")), labels={"v": "2"})
    old = {lbl.NODEPOOL_HASH: "stale", lbl.NODEPOOL_HASH_VERSION: "v3"}
    nodes = (_node("d1", M2, annotations=old), _node("d2", M2, annotations=old))
    pods = (b.bound("d1", cpu="1500m"), b.bound("d2", cpu="1500m"))
    steps = _summary(_cluster((pool,), nodes, pods))
    assert steps == [("Drifted", ("d1",), ("m-2x",)), ("Drifted", ("d2",), ("m-2x",))]


def test_drift_waits_for_pod_blockers_unless_termination_grace_is_set() -> None:
    old = {lbl.NODEPOOL_HASH: "stale", lbl.NODEPOOL_HASH_VERSION: "v3"}
    pods = (b.bound("d1", cpu="1500m", annotations={lbl.DO_NOT_DISRUPT: "true"}),)
    plain = _cluster((_pool(),), (_node("d1", M2, annotations=old),), pods)
    assert _summary(plain) == []
    graceful = _pool()
    graceful = replace(
        graceful, template=replace(graceful.template, termination_grace_seconds=600.0)
    )
    assert _summary(_cluster((graceful,), (_node("d1", M2, annotations=old),), pods)) == [
        ("Drifted", ("d1",), ("m-2x",))
    ]


def test_drift_comes_before_consolidation_and_after_emptiness() -> None:
    old = {lbl.NODEPOOL_HASH: "stale", lbl.NODEPOOL_HASH_VERSION: "v3"}
    nodes = (_node("empty", M4), _node("drifted", M2, annotations=old), _node("big", M8))
    pods = (b.bound("drifted", cpu="1500m"), b.bound("big", cpu="1"))
    reasons = [s[0] for s in _summary(_cluster((_pool(),), nodes, pods))]
    assert reasons[:2] == ["Empty", "Drifted"]
    assert reasons[2:] == ["Underutilized"]


def test_settling_passes_leave_emptiness_and_consolidation_out() -> None:
    """While pods are on the move only drift (and expiration) act: the empty and the
    underutilized nodes wait, the drifted one is replaced; with nothing drifted, no command."""
    old = {lbl.NODEPOOL_HASH: "stale", lbl.NODEPOOL_HASH_VERSION: "v3"}
    nodes = (_node("empty", M4), _node("drifted", M2, annotations=old), _node("big", M8))
    pods = (b.bound("drifted", cpu="1500m"), b.bound("big", cpu="1"))
    cluster = _cluster((_pool(),), nodes, pods)
    settled, _ = decide(cluster, DEFAULTS, NOW, assume_consolidate_after_elapsed=True)
    assert settled is not None and settled.reason == "Empty"
    moving, _ = decide(cluster, DEFAULTS, NOW, assume_consolidate_after_elapsed=True, settling=True)
    assert moving is not None and (moving.reason, moving.names) == ("Drifted", ("drifted",))
    undrifted = _cluster((_pool(),), (_node("empty", M4), _node("big", M8)), pods[1:])
    assert _first(undrifted) is not None
    none, _ = decide(undrifted, DEFAULTS, NOW, assume_consolidate_after_elapsed=True, settling=True)
    assert none is None


# ---- expiration ------------------------------------------------------------------------------
def test_expiration_ignores_budgets_and_blockers() -> None:
    pool = _pool(budgets=(Budget("0"),), expire_after=24 * HOUR)
    nodes = (_node("old", M2, creation=NOW - 25 * HOUR), _node("new", M2, creation=NOW - HOUR))
    pods = (
        b.bound("old", cpu="1500m", annotations={lbl.DO_NOT_DISRUPT: "true"}),
        b.bound("new", cpu="1500m"),
    )
    result = plan(_cluster((pool,), nodes, pods), Options(), NOW)
    (step,) = result.steps
    assert (step.command.reason, step.command.names) == ("Expired", ("old",))
    assert [r.launch.instance_type for r in step.command.replacements] == ["m-2x"]


def test_expired_pods_with_nowhere_to_go_become_pending() -> None:
    pool = _pool(expire_after=HOUR, limits=b.requests(cpu="1"))
    cluster = _cluster(
        (pool,), (_node("old", M2, creation=NOW - 2 * HOUR),), (b.bound("old", "p", cpu="1500m"),)
    )
    result = plan(cluster, Options(), NOW)
    (step,) = result.steps
    assert step.command.replacements == ()
    (pod,) = result.final.pods
    assert pod.node_name == ""


# ---- the planner -----------------------------------------------------------------------------
def test_plan_prices_and_final_snapshot() -> None:
    nodes = (_node("e", M4), _node("big", M8), _node("keep", M1))
    pods = (b.bound("big", "p", cpu="1"), b.bound("keep", cpu="800m"))
    result = plan(_cluster((_pool(),), nodes, pods), Options(), NOW)
    assert result.price_before == pytest.approx(0.36 + 0.72 + 0.09)
    # The empty node goes, then the m-8x and the m-1x become one m-2x.
    assert [s.command.method for s in result.steps] == ["emptiness", "multi"]
    assert result.price_after == pytest.approx(0.18)
    assert {p.node_name for p in result.final.pods} == {"simulated-1"}
    assert [n.name for n in result.final.nodes] == ["simulated-1"]


def test_plan_is_deterministic() -> None:
    nodes = tuple(_node(f"n{i}", (M2, M4, M8)[i % 3]) for i in range(9))
    pods = tuple(b.bound(f"n{i}", f"p{i}", cpu="700m") for i in range(9))
    cluster = _cluster((_pool(),), nodes, pods)
    assert _summary(cluster) == _summary(cluster)
    assert plan(cluster, Options(), NOW).price_after < plan(cluster, Options(), NOW).price_before
