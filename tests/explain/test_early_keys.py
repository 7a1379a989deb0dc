"""explain and the viewer count the pods provisioned before the kube-scheduler's verdict."""

from __future__ import annotations

from typing import Any

from karpenter.explain.live import early_keys
from karpenter.state.cluster import ClusterState

NOW = 1767225700.0  # 2026-01-01T00:01:40Z


def _pod(name: str, created: str, *, judged: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if judged:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
        "spec": {"containers": [{"name": "c"}]},
        "status": status,
    }


def test_unjudged_pods_between_one_second_and_a_minute_old_are_early() -> None:
    """By creation time (a one-shot listing has no first-seen time): 1-60 s old, unjudged."""
    state = ClusterState()
    state.pods.upsert(_pod("fresh", "2026-01-01T00:01:40Z"))  # 0 s
    state.pods.upsert(_pod("due", "2026-01-01T00:01:35Z"))  # 5 s
    state.pods.upsert(_pod("stale", "2026-01-01T00:00:30Z"))  # 70 s: the scheduler may be down
    state.pods.upsert(_pod("judged", "2026-01-01T00:01:35Z", judged=True))
    assert early_keys(state, NOW) == {"ns/due"}
    keys = [p.key for p in state.provisionable_pods(early_keys(state, NOW))]
    assert keys == ["ns/due", "ns/judged"]
