"""Which pod changes count as a NodeClaim's pod event, and with which time (no writes here)."""

from __future__ import annotations

from typing import Any, cast

from karpenter.aio.clock import FakeClock
from karpenter.controllers.podevents import PodEvents
from karpenter.kube.client import KubeClient
from karpenter.state.cluster import ClusterState
from tests.support.context import controller_context

BOUND_AT = "2026-01-01T00:00:10Z"
T_BOUND = 1767225610.0


def _pod(rv: int, *, node: str = "n1", owner: str = "", **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": str(rv)}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "apiVersion": "apps/v1"}]
    if status.pop("deleting", False):
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    cond = {"type": "PodScheduled", "status": "True", "lastTransitionTime": BOUND_AT}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": [cond], **status},
    }


def _claim(rv: int, node: str = "n1") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "c1", "resourceVersion": str(rv)},
        "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "x"}},
        "status": {"nodeName": node, "providerID": "sim://c1"},
    }


def _events() -> tuple[ClusterState, PodEvents, FakeClock]:
    state = ClusterState()
    clock = FakeClock(1767225700.0)
    # reconcile (the only user of the client) is exercised on the real apiserver in e2e
    ctx = controller_context(cast("KubeClient", None), clock, state=state)
    return state, PodEvents(ctx), clock


def test_bind_uses_the_scheduled_transition_time() -> None:
    """A pod bound to a claim's node queues the PodScheduled lastTransitionTime."""
    state, events, _ = _events()
    state.nodeclaims.upsert(_claim(1))
    state.pods.upsert(_pod(1))
    assert events.pending == {"c1": T_BOUND}


def test_unrelated_updates_queue_nothing_new() -> None:
    """A second update with the same signature (e.g. a label) does not queue again."""
    state, events, _ = _events()
    state.nodeclaims.upsert(_claim(1))
    state.pods.upsert(_pod(1))
    events.pending.clear()
    state.pods.upsert(_pod(2, ready="yes"))
    assert events.pending == {}


def test_terminating_and_terminal_use_now() -> None:
    """A pod starting to terminate, or finishing, queues the current time."""
    state, events, clock = _events()
    state.nodeclaims.upsert(_claim(1))
    state.pods.upsert(_pod(1))
    state.pods.upsert(_pod(2, deleting=True))
    assert events.pending == {"c1": clock.now()}
    events.pending.clear()
    state2, events2, clock2 = _events()
    state2.nodeclaims.upsert(_claim(1))
    state2.pods.upsert(_pod(1))
    state2.pods.upsert(_pod(2, phase="Succeeded"))
    assert events2.pending == {"c1": clock2.now()}


def test_daemonset_pods_and_unmanaged_nodes_do_not_count() -> None:
    """DaemonSet pods are overhead; a node with no NodeClaim has nothing to stamp."""
    state, events, _ = _events()
    state.nodeclaims.upsert(_claim(1))
    state.pods.upsert(_pod(1, owner="DaemonSet"))
    state.pods.upsert({**_pod(2, node="other"), "metadata": {**_pod(2)["metadata"], "name": "q"}})
    assert events.pending == {}


def test_pods_seen_before_their_claim_catch_up() -> None:
    """Informers replay in any order: a claim indexed after its pods still gets their time."""
    state, events, _ = _events()
    state.pods.upsert(_pod(1))
    assert events.pending == {}
    state.nodeclaims.upsert(_claim(1))
    assert events.pending == {"c1": T_BOUND}
