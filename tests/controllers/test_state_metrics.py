"""Pod and NodePool gauges follow the mirror: series appear, move and disappear."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from prometheus_client.parser import text_string_to_metric_families

from karpenter.aio.clock import FakeClock
from karpenter.controllers.state_metrics import StateMetrics
from karpenter.observability.metrics import Metrics
from karpenter.state.cluster import ClusterState
from tests.support.context import controller_context

if TYPE_CHECKING:
    from karpenter.controllers.context import ControllerContext
    from karpenter.kube.client import KubeClient


def _series(metrics: Metrics, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for family in text_string_to_metric_families(metrics.render().decode()):
        out += [(dict(s.labels), s.value) for s in family.samples if s.name == name]
    return out


def _pod(rv: int, node: str = "", phase: str = "Pending", ready_at: str = "") -> dict[str, Any]:
    conditions = []
    if ready_at:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": ready_at})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": "u1",
            "resourceVersion": str(rv),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web"}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": phase, "conditions": conditions},
    }


def _node(rv: int, zone: str) -> dict[str, Any]:
    labels = {
        "karpenter.sh/nodepool": "general",
        "topology.kubernetes.io/zone": zone,
        "kubernetes.io/arch": "arm64",
        "karpenter.sh/capacity-type": "spot",
        "node.kubernetes.io/instance-type": "m7g.large",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": str(rv), "labels": labels},
    }


def _context(state: ClusterState, metrics: Metrics) -> ControllerContext:
    # the mirror observer reads only the mirror and writes only metrics: no client is needed
    return controller_context(
        cast("KubeClient", None), FakeClock(0.0), state=state, metrics=metrics
    )


def test_pod_series_tracks_phase_node_labels_and_deletion() -> None:
    """One series per pod; it is replaced when the pod or its node changes, removed on delete."""
    state, metrics = ClusterState(), Metrics()
    StateMetrics(_context(state, metrics))
    state.pods.upsert(_pod(1))
    [(labels, value)] = _series(metrics, "karpenter_pods_state")
    assert value == 1.0
    assert labels["owner"] == "/apis/apps/v1/namespaces/shop/replicasets/web"
    assert (labels["scheduled"], labels["phase"], labels["managed"]) == (
        "false",
        "Pending",
        "false",
    )

    state.nodes.upsert(_node(1, "z-a"))
    state.pods.upsert(_pod(2, node="n1", phase="Running", ready_at="2026-01-01T00:00:42Z"))
    [(labels, _)] = _series(metrics, "karpenter_pods_state")
    assert labels == {
        "name": "web-1", "namespace": "shop",
        "owner": "/apis/apps/v1/namespaces/shop/replicasets/web", "node": "n1",
        "scheduled": "true", "nodepool": "general", "zone": "z-a", "arch": "arm64",
        "capacity_type": "spot", "instance_type": "m7g.large", "phase": "Running",
        "ready": "true", "managed": "true",
    }  # fmt: skip
    # seen Pending, then Ready 42 s after creation
    assert _series(metrics, "karpenter_pods_startup_duration_seconds_sum") == [({}, 42.0)]

    state.nodes.upsert(_node(2, "z-b"))  # a node label change moves the pod's series
    [(labels, _)] = _series(metrics, "karpenter_pods_state")
    assert labels["zone"] == "z-b"

    state.pods.apply("DELETED", _pod(3, node="n1", phase="Running"))
    assert _series(metrics, "karpenter_pods_state") == []


def _nodepool(rv: int, cpu: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}}}
    }
    if cpu is not None:
        spec["limits"] = {"cpu": cpu}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "general", "resourceVersion": str(rv)},
        "spec": spec,
    }


def _claim(name: str, rv: int, cpu: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "resourceVersion": str(rv),
        "labels": {"karpenter.sh/nodepool": "general"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": meta,
        "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}},
        "status": {"providerID": f"sim://{name}", "capacity": {"cpu": cpu, "memory": "1Gi"}},
    }


def test_nodepool_limit_and_usage() -> None:
    """Usage sums the capacity of claims not being deleted; limits follow the spec."""
    state, metrics = ClusterState(), Metrics()
    StateMetrics(_context(state, metrics))
    state.nodeclaims.upsert(_claim("a", 1, "2"))  # before its pool is known
    state.nodepools.upsert(_nodepool(1, "100"))
    state.nodeclaims.upsert(_claim("b", 1, "500m"))

    def usage() -> dict[str, float]:
        return {
            labels["resource_type"]: value
            for labels, value in _series(metrics, "karpenter_nodepools_usage")
        }

    assert usage() == {"cpu": 2.5, "memory": 2 * 1024**3}
    assert _series(metrics, "karpenter_nodepools_limit") == [
        ({"resource_type": "cpu", "nodepool": "general"}, 100.0)
    ]
    state.nodeclaims.upsert(_claim("a", 2, "2", deleting=True))
    assert usage() == {"cpu": 0.5, "memory": 1024**3}
    state.nodeclaims.apply("DELETED", _claim("b", 2, "500m"))
    state.nodepools.upsert(_nodepool(2, None))  # limits removed: the limit series goes
    assert _series(metrics, "karpenter_nodepools_limit") == []
    assert usage() == {"cpu": 0.0, "memory": 0.0}
