"""``explain node`` as a table: every reason a node stays, or the command that removes it.

Catalog (tests.support.builders.catalog): m-1x/2x/4x/8x/16x with 1..16 CPU at 0.09..1.44 USD/h
on-demand (half on spot), zone-a/b/c, 100m CPU overhead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from karpenter.core import buffers
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options, PodDisruptionBudget
from karpenter.core.model.nodepool import WHEN_EMPTY, Budget, Disruption, NodePool
from karpenter.explain import nodes, render
from tests.support import builders as b

NOW = 1_800_000_000.0
HOUR = 3600.0
M1, M2, M4, M8, M16 = b.catalog()
ON_DEMAND = b.term((lbl.CAPACITY_TYPE, "In", ["on-demand"]))


def _pool(
    policy: str = "WhenEmptyOrUnderutilized",
    after: float | None = 0.0,
    budgets: tuple[Budget, ...] = (Budget("100%"),),
) -> NodePool:
    return b.nodepool(
        "default", requirements=ON_DEMAND, disruption=Disruption(policy, after, budgets)
    )


def _cluster(
    pool: NodePool, *pods: Any, node_type: Any = M8, other_load: str = "1", **kw: Any
) -> Cluster:
    target = b.managed_node("target", node_type, creation=NOW - HOUR)
    other = b.managed_node("other", M4, creation=NOW - HOUR)
    bound = (b.bound("other", cpu=other_load), *pods)
    return b.cluster((pool,), nodes=(target, other), pods=bound, **kw)


SMALL = b.bound("target", "small", cpu="500m")
GUARDED = b.bound("target", "guarded", cpu="500m", annotations={lbl.DO_NOT_DISRUPT: "true"})
DB = b.bound("target", "db", cpu="500m", labels={"app": "db"})
HUGE = b.bound("target", "huge", cpu="7")


@pytest.mark.parametrize(
    ("cluster", "kinds"),
    [
        pytest.param(
            _cluster(
                _pool(),
                GUARDED,
                DB,
                pdbs=(PodDisruptionBudget("default", "db", b.selector(app="db"), 0),),
            ),
            ["DoNotDisrupt", "PodDisruptionBudget"],
            id="every-pod-blocker",
        ),
        pytest.param(_cluster(_pool(after=None), SMALL), ["ConsolidationDisabled"], id="never"),
        pytest.param(_cluster(_pool(after=2 * HOUR), SMALL), ["ConsolidateAfter"], id="after"),
        pytest.param(_cluster(_pool(policy=WHEN_EMPTY), SMALL), ["WhenEmpty"], id="when-empty"),
        pytest.param(
            _cluster(_pool(budgets=(Budget("0", reasons=("Underutilized",)),)), SMALL),
            ["BudgetExhausted"],
            id="budget-for-the-reason",
        ),
        pytest.param(
            _cluster(_pool(), SMALL, node_type=M1, other_load="3.5"),
            ["NotCheaper"],
            id="not-cheaper-to-replace",
        ),
        pytest.param(
            _cluster(_pool(), HUGE, node_type=M8, other_load="3.5"),
            ["NotCheaper"],
            id="no-cheaper-type-holds-it",
        ),
        pytest.param(
            _cluster(_pool(policy=WHEN_EMPTY, after=None), GUARDED),
            ["DoNotDisrupt", "ConsolidationDisabled"],
            id="several-at-once",
        ),
    ],
)
def test_reasons(cluster: Cluster, kinds: list[str]) -> None:
    """A node that stays gets every reason, not only the first a pass would meet."""
    verdict = nodes.explain_node(cluster, "target", Options(), NOW)
    assert not verdict.candidate
    assert [r.kind for r in verdict.reasons] == kinds


def test_replace_with_cheaper_is_the_command_with_savings() -> None:
    """An underused node is a candidate: the command (here the next pass's multi-node one,
    which takes it) names it and the savings are the removed price less the replacement's."""
    verdict = nodes.explain_node(_cluster(_pool(), SMALL), "target", Options(), NOW)
    assert verdict.candidate and verdict.command is not None
    doc = render.node_json(verdict)
    assert "target" in doc["command"]["nodes"]
    assert doc["command"]["savingsPerHour"] == pytest.approx(
        verdict.command.price_removed - sum(r.launch.price for r in verdict.command.replacements)
    )
    assert doc["command"]["savingsPerHour"] > 0
    assert doc["command"]["savingsPerMonth"] == pytest.approx(
        doc["command"]["savingsPerHour"] * 730, abs=0.01
    )
    assert "savings:" in render.node_table(doc)


def test_empty_node_is_deleted() -> None:
    """An empty node is a candidate for emptiness: delete, saving its whole price."""
    verdict = nodes.explain_node(_cluster(_pool()), "target", Options(), NOW)
    assert verdict.command is not None
    assert (verdict.command.decision, verdict.command.reason) == ("delete", "Empty")
    assert verdict.command.savings == pytest.approx(0.72)


def test_unmanaged_and_unknown_nodes() -> None:
    """A node without a NodePool is not Karpenter's; an unknown name raises UnknownNode."""
    cluster = b.cluster((_pool(),), nodes=(b.node("plain"),))
    verdict = nodes.explain_node(cluster, "plain", Options(), NOW)
    assert [r.kind for r in verdict.reasons] == ["Unmanaged"]
    with pytest.raises(nodes.UnknownNode):
        nodes.explain_node(cluster, "nope", Options(), NOW)


def test_a_node_on_its_way_out_says_only_that() -> None:
    """A node being deleted reports that, not the budgets and policies that no longer matter."""
    pool = _pool(after=None)
    node = b.managed_node("target", M8, creation=NOW - HOUR, deleting=True)
    cluster = b.cluster((pool,), nodes=(node,), pods=(SMALL,))
    verdict = nodes.explain_node(cluster, "target", Options(), NOW)
    assert [r.kind for r in verdict.reasons] == ["Deleting"]


def test_a_node_holding_buffer_headroom_is_not_deleted_as_empty() -> None:
    """An empty node a CapacityBuffer's virtual pods need (no other node has the room) is not
    deleted for emptiness: the verdict follows the disruption controller's headroom rule."""
    chunk = b.pod("chunk", cpu="6")
    headroom = buffers.virtual_pods(buffers.Buffer("default", "warm", chunk, 1))
    plain = nodes.explain_node(_cluster(_pool()), "target", Options(), NOW)
    kept = nodes.explain_node(
        replace(_cluster(_pool()), virtual_pods=headroom), "target", Options(), NOW
    )
    assert plain.command is not None and plain.command.reason == "Empty"
    assert kept.command is None and not kept.candidate
    assert [r.kind for r in kept.reasons] == ["NotCheaper"]
