"""Validation after the wait: a command's own candidates judged again, as upstream does."""

from __future__ import annotations

from dataclasses import replace

from karpenter.core.disruption.commands import Command
from karpenter.core.disruption.planner import decide
from karpenter.core.disruption.validation import as_in_flight, as_started, judge_again
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node
from karpenter.core.model.nodepool import Budget, Disruption
from karpenter.core.model.pod import Pod
from tests.support import builders as b

NOW = 1_800_000_000.0
HOUR = 3600.0
M1, M2, M4, M8, M16 = b.catalog()
POOL = b.nodepool(
    disruption=Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("100%"),)),
    requirements=b.term((lbl.CAPACITY_TYPE, "In", ["on-demand"])),
)


def _node(name: str, it: InstanceType, zone: str = "zone-a") -> Node:
    return b.managed_node(name, it, zone=zone, creation=NOW - HOUR)


def _cluster(nodes: tuple[Node, ...], pods: tuple[Pod, ...]) -> Cluster:
    return b.cluster([POOL], nodes=nodes, pods=pods)


def _decide(cluster: Cluster) -> Command:
    command, _ = decide(cluster, Options(), NOW, assume_consolidate_after_elapsed=True)
    assert command is not None
    return command


def _pinned(node: str, name: str, zone: str = "zone-a") -> Pod:
    return b.bound(node, name, cpu="1", node_selector={lbl.ZONE: zone})


def _oversized() -> Cluster:
    """An m-8x running one 1-CPU pod pinned to its zone: replaced by an m-2x."""
    return _cluster((_node("big", M8),), (_pinned("big", "p"),))


def test_command_holds_when_a_better_ranked_candidate_appears() -> None:
    """A node joining during the wait changes what a fresh decision picks, but the command's
    own candidate still consolidates the same way, so validation keeps it."""
    command = _decide(_oversized())
    assert command.names == ("big",) and len(command.replacements) == 1
    later = _cluster(
        (_node("big", M8), _node("bigger", M16, zone="zone-b")),
        (_pinned("big", "p"), _pinned("bigger", "q", zone="zone-b")),
    )
    assert _decide(later).names != command.names
    again = judge_again(later, Options(), NOW, command)
    assert not isinstance(again, str), again
    assert again.names == command.names
    assert [r.launch.instance_type for r in again.replacements] == ["m-2x"]


def test_command_fails_when_a_candidate_gets_blocked() -> None:
    """A do-not-disrupt pod landing on a candidate during the wait invalidates the command."""
    command = _decide(_oversized())
    guarded = b.bound("big", "g", cpu="100m", annotations={lbl.DO_NOT_DISRUPT: "true"})
    later = _cluster((_node("big", M8),), (_pinned("big", "p"), guarded))
    why = judge_again(later, Options(), NOW, command)
    assert isinstance(why, str) and why.startswith("NotConsolidatable: big: "), why
    assert "do-not-disrupt" in why


def test_delete_fails_when_it_would_now_need_a_replacement() -> None:
    """A delete whose pods no longer fit elsewhere is not turned into a replacement."""
    nodes = (_node("a", M4), _node("b", M4))
    command = _decide(_cluster(nodes, (b.bound("a", "p1"), b.bound("b", "p2"))))
    assert command.names == ("a",) and command.replacements == ()
    full = b.bound("b", "filler", cpu="3")
    later = _cluster(nodes, (b.bound("a", "p1"), b.bound("b", "p2"), full))
    why = judge_again(later, Options(), NOW, command)
    assert isinstance(why, str) and why.startswith(("DecisionChanged:", "NotCheaper:")), why


def test_emptiness_fails_when_a_pod_lands() -> None:
    """An empty node that got a pod during the wait is no longer deleted as empty."""
    command = _decide(_cluster((_node("e", M4),), ()))
    assert command.method == "emptiness"
    later = _cluster((_node("e", M4),), (b.bound("e", "p"),))
    assert judge_again(later, Options(), NOW, command) == (
        "NotEmpty: e no longer empty or no longer deletable as empty"
    )
    assert judge_again(_cluster((_node("e", M4),), ()), Options(), NOW, command) == command


def test_command_fails_when_its_pool_has_no_budget_left() -> None:
    """A pool whose budget fell to zero during the wait invalidates the command."""
    command = _decide(_oversized())
    closed = replace(POOL, disruption=Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("0"),)))
    later = b.cluster([closed], nodes=(_node("big", M8),), pods=(_pinned("big", "p"),))
    why = judge_again(later, Options(), NOW, command)
    assert isinstance(why, str) and why.startswith("BudgetExceeded: nodepool "), why


def _next(cluster: Cluster, options: Options | None = None) -> Command | None:
    chosen = Options() if options is None else options
    command, _ = decide(cluster, chosen, NOW, assume_consolidate_after_elapsed=True)
    return command


GUARD = {lbl.DO_NOT_DISRUPT: "true"}


def test_waiting_command_nodes_are_no_candidates() -> None:
    """Nodes marked for a command in its validation wait are not picked again."""
    assert _next(_oversized()) is not None
    assert _next(as_in_flight(_oversized(), ["big"])) is None


def test_waiting_command_pods_take_the_room_they_will_need() -> None:
    """A decision taken during another command's wait does not count on room that command's
    pods will take: with ``a`` marked, ``b`` can no longer be deleted onto ``c``'s room."""
    nodes = (_node("a", M4), _node("b", M4), _node("c", M4))
    pods = (
        b.bound("a", "p1", cpu="1"),
        b.bound("b", "p2", cpu="1"),
        b.bound("c", "f", cpu="2500m", annotations=GUARD),  # c stays, room for one pod
    )
    without_a = _next(_cluster(nodes[1:], pods[1:]))
    assert without_a is not None and without_a.names == ("b",) and not without_a.replacements
    marked = _next(as_in_flight(_cluster(nodes, pods), ["a"]))
    assert marked is not None and marked.names == ("b",)
    assert [r.launch.instance_type for r in marked.replacements] == ["m-2x"]


def test_waiting_command_counts_against_the_budget() -> None:
    """With a budget of one node, a command in its wait leaves no room for a second."""
    pool = replace(POOL, disruption=Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("1"),)))
    cluster = b.cluster([pool], nodes=(_node("e1", M4), _node("e2", M4)), pods=())
    first = _next(cluster)
    assert first is not None and first.method == "emptiness" and len(first.names) == 1
    assert _next(as_in_flight(cluster, first.names)) is None
    assert _next(b.cluster([pool], nodes=(_node("e2", M4),), pods=())) is not None


def test_marking_adds_the_taint_once_and_leaves_others_alone() -> None:
    """Marking is the disrupted taint on exactly the named nodes, never twice."""
    cluster = _cluster((_node("a", M4), _node("b", M4)), ())
    assert as_in_flight(cluster, []) is cluster
    once = as_in_flight(cluster, ["a"])
    twice = as_in_flight(once, ["a"])
    taints = {n.name: [t.key for t in n.taints] for n in twice.nodes}
    assert taints["a"].count(lbl.TAINT_DISRUPTED) == 1
    assert lbl.TAINT_DISRUPTED not in taints["b"]


def test_a_waiting_command_leaves_the_next_only_the_room_it_does_not_take() -> None:
    """``c`` has room for 3 CPUs: ``a``'s 2-CPU pod goes there (delete ``a``). With ``a`` only
    marked, the next what-if schedules ``a``'s pod beside ``b``'s 3-CPU one, the larger first:
    ``b``'s takes ``c`` and ``a``'s goes to a NodeClaim no candidate needs, so ``b`` too was
    deleted onto ``c`` (5 CPUs onto 3). With ``a`` as started, ``a``'s pod is on ``c``. (The
    stranding check refuses the double count on its own: the kube-scheduler binds ``a``'s
    pod, evicted first, on ``c`` and ``b``'s finds no node.)"""
    nodes = (_node("a", M4), _node("b", M4), _node("c", M4))
    pods = (
        b.bound("a", "p1", cpu="2"),
        b.bound("b", "p2", cpu="3"),
        b.bound("c", "f", cpu="900m", annotations=GUARD),  # 3 CPUs left of 3.9
    )
    cluster = _cluster(nodes, pods)
    first = _next(cluster)
    assert first is not None and first.names == ("a",) and first.moves == (("default/p1", "c"),)
    unchecked = Options(stranding_check=False)
    marked = _next(as_in_flight(cluster, first.names), unchecked)
    assert marked is not None and marked.moves == (("default/p2", "c"),)  # the double count
    assert _next(as_in_flight(cluster, first.names)) is None
    assert _next(as_started(cluster, [first], NOW)) is None


def test_as_started_moves_the_pods_and_adds_replacements_not_initialized() -> None:
    """The commands' nodes are marked, their pods bound where they move them (a replacement's
    pods on a node standing for it, not initialized), other pods left alone; a pod whose
    destination went away during the wait stays, to be rescheduled."""
    command = _decide(_oversized())
    assert command.moves == (("default/p", "replacement:0"),)
    started = as_started(_oversized(), [command], NOW)
    by_name = {n.name: n for n in started.nodes}
    assert lbl.TAINT_DISRUPTED in [t.key for t in by_name["big"].taints]
    new = by_name["round-0-replacement-0"]
    assert lbl.INITIALIZED not in new.labels and new.allocatable["cpu"] == M2.allocatable["cpu"]
    assert [(p.name, p.node_name) for p in started.pods] == [("p", "round-0-replacement-0")]
    gone = replace(command, moves=(("default/p", "elsewhere"),))
    assert [p.node_name for p in as_started(_oversized(), [gone], NOW).pods] == ["big"]
    cluster = _oversized()
    assert as_started(cluster, [], NOW) is cluster
