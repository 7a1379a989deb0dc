"""The viewer's tracker: mirror changes in, only the touched rows rebuilt."""

from __future__ import annotations

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.state.cluster import ClusterState
from karpenter.viewer import model, selector
from karpenter.viewer.tracker import Tracker
from tests.support import rawobjects as raw


def _tracker(**kw: object) -> tuple[ClusterState, Tracker]:
    state = ClusterState()
    return state, Tracker(state, model.price_book(fake_instance_types(8)), **kw)  # type: ignore[arg-type]


def test_a_claim_row_becomes_a_node_row() -> None:
    """A launching NodeClaim has its own row until its Node registers; then the Node's row
    carries the claim's state, pods and price."""
    state, tracker = _tracker()
    state.nodeclaims.apply("ADDED", raw.claim("c1"))
    assert [(r.name, r.state) for r in tracker.refresh()] == [("c1", model.LAUNCHING)]
    state.nodeclaims.apply("MODIFIED", raw.claim("c1", 2, node_name="c1"))
    state.nodes.apply("ADDED", raw.node("c1"))
    state.pods.apply("ADDED", raw.pod("p1", node_name="c1"))
    rows = tracker.refresh()
    assert [(r.name, r.state, r.pods, r.cpu_requested) for r in rows] == [
        ("c1", model.INITIALIZED, 1, 500)
    ]
    assert rows[0].price is not None
    state.nodes.apply("DELETED", raw.node("c1", 3))
    assert [(r.name, r.state) for r in tracker.refresh()] == [("c1", model.LAUNCHING)]


def test_only_touched_rows_are_rebuilt() -> None:
    """A pod binding rebuilds its node's row, not the other 99."""
    state, tracker = _tracker()
    for i in range(100):
        state.nodes.apply("ADDED", raw.node(f"n{i}"))
    tracker.refresh()
    before = tracker.rebuilt
    state.pods.apply("ADDED", raw.pod("p", node_name="n7"))
    rows = {r.name: r for r in tracker.refresh()}
    assert tracker.rebuilt - before == 1
    assert rows["n7"].pods == 1


def test_pending_pods_and_filters() -> None:
    """Unbound pods are pending until bound; --nodepool and --selector keep only their nodes."""
    state, tracker = _tracker(nodepool="gpu")
    state.nodes.apply("ADDED", raw.node("a", pool="general"))
    state.nodes.apply("ADDED", raw.node("b", pool="gpu"))
    state.pods.apply("ADDED", raw.pod("p"))
    assert [r.name for r in tracker.refresh()] == ["b"]
    assert [p.key for p in tracker.pending_pods()] == ["ns/p"]
    state.pods.apply("MODIFIED", raw.pod("p", 2, node_name="b"))
    assert tracker.pending_pods() == []
    state, tracker = _tracker(selector=selector.parse_selector("karpenter.sh/nodepool!=gpu"))
    state.nodes.apply("ADDED", raw.node("a", pool="general"))
    state.nodes.apply("ADDED", raw.node("b", pool="gpu"))
    assert [r.name for r in tracker.refresh()] == ["a"]


def test_a_disrupting_row_shows_the_reason() -> None:
    """A tainted node whose claim has DisruptionReason=True shows disrupting (reason)."""
    state, tracker = _tracker()
    claim = raw.claim("c1", node_name="c1")
    claim["status"]["conditions"] = [
        {"type": "DisruptionReason", "status": "True", "reason": "Underutilized"}
    ]
    state.nodeclaims.apply("ADDED", claim)
    taint = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
    state.nodes.apply("ADDED", raw.node("c1", taints=[taint]))
    [row] = tracker.refresh()
    assert (row.state, row.reason) == (model.DISRUPTING, "Underutilized")
