"""Node repair decisions: policy matching, tolerations, and the 20%-of-the-pool guard."""

from __future__ import annotations

import math

from karpenter.core import repair
from karpenter.core.repair import Condition, NodeHealth, RepairPolicy

POLICIES = (
    RepairPolicy("Ready", "False", 600.0),
    RepairPolicy("Ready", "Unknown", 600.0),
    RepairPolicy("AcceleratedHardwareReady", "False", 60.0),
)


def _node(name: str, *conds: tuple[str, str, float], pool: str = "p") -> NodeHealth:
    return NodeHealth(name, f"claim-{name}", pool, tuple(Condition(*c) for c in conds))


def _healthy(name: str, pool: str = "p") -> NodeHealth:
    return _node(name, ("Ready", "True", 0.0), pool=pool)


def test_matching_takes_the_policy_due_first() -> None:
    """Several matching conditions: the one whose toleration ends first wins."""
    node = _node("a", ("Ready", "False", 100.0), ("AcceleratedHardwareReady", "False", 400.0))
    policy, due = repair.matching(node, POLICIES)
    assert (policy.condition_type, due) == ("AcceleratedHardwareReady", 460.0)
    assert repair.matching(_healthy("b"), POLICIES)[1] == math.inf


def test_not_due_before_the_toleration() -> None:
    """NotReady for 9 minutes is noted with its due time, not repaired; at 10 minutes it is."""
    nodes = [_node("a", ("Ready", "False", 1000.0)), *(_healthy(f"h{i}") for i in range(9))]
    decisions = repair.decide(nodes, POLICIES, 1000.0 + 540)
    assert [(d.node.node, d.due, d.blocked) for d in decisions] == [("a", 1600.0, False)]
    assert repair.due_now(decisions, 1540.0) == []
    assert repair.next_check(decisions, 1540.0, 300.0) == 60.0
    assert [
        d.node.node for d in repair.due_now(repair.decide(nodes, POLICIES, 1600.0), 1600.0)
    ] == ["a"]


def test_twenty_percent_guard_per_pool() -> None:
    """2 of 10 unhealthy (20%, ceil) are repaired; 3 of 10 are all held back; other pools are
    judged on their own."""
    sick = [_node(f"s{i}", ("Ready", "Unknown", 0.0)) for i in range(2)]
    pool = [*sick, *(_healthy(f"h{i}") for i in range(8))]
    assert len(repair.due_now(repair.decide(pool, POLICIES, 700.0), 700.0)) == 2
    worse = [*pool[:-1], _node("s2", ("Ready", "Unknown", 0.0))]
    decisions = repair.decide(worse, POLICIES, 700.0)
    assert all(d.blocked for d in decisions) and len(decisions) == 3
    assert repair.next_check(decisions, 700.0, 300.0) == 300.0
    other = [
        _node("x", ("Ready", "False", 0.0), pool="q"),
        *(_healthy(f"q{i}", "q") for i in range(4)),
    ]
    mixed = repair.decide([*worse, *other], POLICIES, 700.0)
    assert [d.node.node for d in repair.due_now(mixed, 700.0)] == ["x"]


def test_small_pools_round_up() -> None:
    """One unhealthy node of one is repaired (ceil(0.2) = 1): a lone broken node is replaced."""
    decisions = repair.decide([_node("a", ("Ready", "False", 0.0))], POLICIES, 601.0)
    assert [d.node.node for d in repair.due_now(decisions, 601.0)] == ["a"]


def test_no_policies_no_repair() -> None:
    """A provider without policies never repairs."""
    assert repair.decide([_node("a", ("Ready", "False", 0.0))], (), 10_000.0) == []
