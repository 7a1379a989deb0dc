"""Upstream disruption rules: multi-node consolidation's same-type rule before the spot pin,
and strict requirement drift (well-known labels included)."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.core.disruption.candidates import DRIFT_REQUIREMENTS, survey
from karpenter.core.disruption.commands import Command
from karpenter.core.disruption.planner import decide
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.nodepool import Budget, Disruption
from karpenter.core.model.pod import SelectorTerm
from karpenter.core.provisioning.build import well_known_labels
from karpenter.core.scheduling.taints import NO_SCHEDULE, Taint
from tests.support import builders as b

NOW = 1_800_000_000.0
HOUR = 3600.0
M1, M2, M4, M8, M16 = b.catalog()
BOTH = b.term((lbl.CAPACITY_TYPE, "In", ["on-demand", "spot"]))
DISRUPT = Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("100%"),))


def _od_only(price: float) -> InstanceType:
    """A 4-CPU type sold only on-demand (no spot offering)."""
    return b.instance_type("od-x", 4, 16, price=price, capacity_types=("on-demand",))


def _decide(od_price: float) -> Command | None:
    """Two on-demand nodes (od-x with 1.5 CPU used, m-2x with 1 CPU) in a pool allowing both
    capacity types; their pods fit together on one m-4x, spot 0.18/h."""
    odx = _od_only(od_price)
    pool = b.nodepool(requirements=BOTH, disruption=DISRUPT)
    nodes = (
        b.managed_node("a", odx, creation=NOW - HOUR),
        b.managed_node("b", M2, creation=NOW - HOUR),
    )
    pods = (b.bound("a", "pa", cpu="1500m"), b.bound("b", "pb", cpu="1"))
    cluster = b.cluster((pool,), (*b.catalog(), odx), nodes=nodes, pods=pods)
    command, _ = decide(cluster, Options(), NOW, assume_consolidate_after_elapsed=True)
    return command


@pytest.mark.parametrize(
    ("od_price", "method", "names", "replacement"),
    [
        pytest.param(
            0.15, "single", ("b",), None, id="own-on-demand-type-sets-ceiling-before-spot-pin"
        ),
        pytest.param(0.30, "multi", ("a", "b"), "m-4x", id="spot-option-below-ceiling-kept"),
    ],
)
def test_multi_node_same_type_rule_precedes_spot_pin(
    od_price: float, method: str, names: tuple[str, ...], replacement: str | None
) -> None:
    """A candidate's on-demand-only type among the replacement's options caps every option at
    that candidate's price even though the spot pin would drop it; when nothing stays below
    the cap, multi-node consolidation is abandoned and a smaller command is taken."""
    command = _decide(od_price)
    assert command is not None
    assert (command.method, command.names) == (method, names)
    launched = tuple(r.launch.instance_type for r in command.replacements)
    assert launched == ((replacement,) if replacement else ())
    if replacement:
        (r,) = command.replacements
        assert r.launch.capacity_type == "spot"
        assert "od-x" not in {it.name for it in r.instance_types}


def _drift(requirements: SelectorTerm, **labels: str) -> str:
    pool = b.nodepool(requirements=requirements)
    node = b.managed_node("n1", M4, creation=NOW, labels=labels)
    cluster = b.cluster([pool], nodes=(node,))
    found = survey(cluster, NOW, well_known_labels(cluster, Options()))
    return found.candidates[0].drift


@pytest.mark.parametrize(
    ("requirements", "labels", "drifted"),
    [
        pytest.param(b.term((lbl.REGION, "In", ["r1"])), {}, True, id="well-known-missing"),
        pytest.param(
            b.term((lbl.REGION, "In", ["r1"])), {lbl.REGION: "r1"}, False, id="well-known-matches"
        ),
        pytest.param(
            b.term((lbl.REGION, "In", ["r1"])), {lbl.REGION: "r2"}, True, id="well-known-differs"
        ),
        pytest.param(b.term(("team", "Exists", [])), {}, True, id="exists-on-missing-label"),
        pytest.param(b.term(("team", "Exists", [])), {"team": "x"}, False, id="exists-present"),
        pytest.param(b.term(("team", "NotIn", ["web"])), {}, False, id="notin-missing-ok"),
        pytest.param(b.term(("team", "DoesNotExist", [])), {}, False, id="doesnotexist-ok"),
        pytest.param(
            b.term(("team", "DoesNotExist", [])), {"team": "x"}, True, id="doesnotexist-present"
        ),
        pytest.param(b.term(("gen", "Gt", ["3"])), {}, True, id="gt-on-missing-label"),
        pytest.param(b.term(("gen", "Gt", ["3"])), {"gen": "5"}, False, id="gt-satisfied"),
    ],
)
def test_requirement_drift_is_strict(
    requirements: SelectorTerm, labels: dict[str, str], drifted: bool
) -> None:
    """Every NodePool requirement but NotIn / DoesNotExist needs the label on the node with an
    overlapping value; well-known labels are not exempt."""
    assert _drift(requirements, **labels) == (DRIFT_REQUIREMENTS if drifted else "")


def test_requirement_added_on_missing_label_drifts_then_replaces() -> None:
    """A requirement added on a label the node lacks makes the drift method replace the node."""
    pool = b.nodepool(
        requirements=b.term((lbl.REGION, "In", ["r1"])),
        disruption=Disruption("WhenEmpty", None, (Budget("100%"),)),
    )
    node = b.managed_node("n1", M4, creation=NOW)
    cluster: Cluster = b.cluster([pool], nodes=(node,), pods=(b.bound("n1", "p"),))
    kw: dict[str, Any] = {"assume_consolidate_after_elapsed": True}
    command, _ = decide(cluster, Options(), NOW, **kw)
    assert command is not None and (command.reason, command.names) == ("Drifted", ("n1",))


DISRUPTED = Taint(lbl.TAINT_DISRUPTED, NO_SCHEDULE)


@pytest.mark.parametrize(
    ("budget", "acts"),
    [
        pytest.param("1", False, id="in-flight-node-uses-the-only-slot"),
        pytest.param("2", True, id="second-slot-left"),
    ],
)
def test_in_flight_command_counts_against_budget(budget: str, acts: bool) -> None:
    """A node tainted by an in-flight command counts as disrupting, so a budget of one node
    blocks a second command until the first finishes."""
    pool = b.nodepool(
        requirements=b.term((lbl.REGION, "In", ["r1"])),
        disruption=Disruption("WhenEmpty", None, (Budget(budget),)),
    )
    region = {lbl.REGION: "r1"}
    nodes = (
        b.managed_node("held", M4, creation=NOW, labels=region, taints=(DISRUPTED,)),
        b.managed_node("drifted", M4, creation=NOW),
        b.managed_node("fine", M4, creation=NOW, labels=region),
    )
    cluster = b.cluster([pool], nodes=nodes)
    command, _ = decide(cluster, Options(), NOW, assume_consolidate_after_elapsed=True)
    assert (command is not None and command.names == ("drifted",)) is acts


def test_in_flight_pods_are_counted_as_moving() -> None:
    """Pods of a node held by an in-flight command are rescheduled in every what-if, so a new
    consolidation never counts on room those pods will take."""
    pool = b.nodepool(
        disruption=DISRUPT, requirements=b.term((lbl.CAPACITY_TYPE, "In", ["on-demand"]))
    )
    nodes = (
        b.managed_node("held", M2, creation=NOW - HOUR, taints=(DISRUPTED,)),
        b.managed_node("small", M2, creation=NOW - HOUR),
        b.managed_node("roomy", M4, creation=NOW - HOUR),
    )
    pods = (
        b.bound("held", "h", cpu="1500m"),
        b.bound("small", "s", cpu="1500m"),
        b.bound("roomy", "r", cpu="1500m"),
    )
    cluster = b.cluster([pool], nodes=nodes, pods=pods)
    # One replacement at most (upstream's methods): repack, which may buy several, gives the
    # held pod a new node of its own, so it too counts on no room that pod will take.
    options = Options(max_replacements=1)
    command, _ = decide(cluster, options, NOW, assume_consolidate_after_elapsed=True)
    # Ignoring the held node's pod, "roomy" would be replaced by an m-2x that has no room for
    # it; counted as moving, that pod leaves no cheaper command at all.
    assert command is None


def test_held_nodes_are_blocked_with_the_shells_reason() -> None:
    """Nodes the shell holds back (a command on them just failed) are no candidates this pass,
    and the next-ranked node is chosen instead."""
    pool = b.nodepool(disruption=Disruption("WhenEmpty", 0.0, (Budget("100%"),)))
    nodes = (b.managed_node("e1", M4, creation=NOW), b.managed_node("e2", M2, creation=NOW))
    cluster = b.cluster([pool], nodes=nodes)
    free, _ = decide(cluster, Options(), NOW, assume_consolidate_after_elapsed=True)
    assert free is not None and free.names == ("e1", "e2")
    held = {"e1": "BackingOff: a command on this node failed"}
    command, ps = decide(cluster, Options(), NOW, assume_consolidate_after_elapsed=True, held=held)
    assert command is not None and command.names == ("e2",)
    assert [(x.name, x.reason) for x in ps.survey.blocked] == [("e1", held["e1"])]
