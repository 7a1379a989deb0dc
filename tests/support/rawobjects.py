"""Raw Kubernetes objects as the apiserver sends them (for mirror-fed tests and benchmarks)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
STAMP = "2026-11-25T10:00:00Z"


def node(
    name: str,
    rv: int = 1,
    *,
    pool: str = "default",
    itype: str = "fake-it-2",
    zone: str = "test-zone-1",
    capacity_type: str = "on-demand",
    cpu: str = "4",
    memory: str = "16Gi",
    taints: list[Obj] | None = None,
) -> Obj:
    """A registered, initialized Karpenter Node."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": str(rv),
            "creationTimestamp": STAMP,
            "labels": {
                "karpenter.sh/nodepool": pool,
                "karpenter.sh/registered": "true",
                "karpenter.sh/initialized": "true",
                "node.kubernetes.io/instance-type": itype,
                "topology.kubernetes.io/zone": zone,
                "karpenter.sh/capacity-type": capacity_type,
                "kubernetes.io/hostname": name,
            },
        },
        "spec": {"providerID": f"simulated://{name}", "taints": taints or []},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def claim(name: str, rv: int = 1, *, pool: str = "default", node_name: str = "") -> Obj:
    """A NodeClaim, launched (providerID ``simulated://<name>``) when ``node_name`` is set."""
    status: Obj = {}
    if node_name:
        status = {"providerID": f"simulated://{name}", "nodeName": node_name}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "resourceVersion": str(rv),
            "creationTimestamp": STAMP,
            "labels": {"karpenter.sh/nodepool": pool},
        },
        "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}},
        "status": status,
    }


def pod(name: str, rv: int = 1, *, node_name: str = "", cpu: str = "500m", ns: str = "ns") -> Obj:
    """A pod requesting ``cpu`` and 1Gi, bound to ``node_name`` or pending (Unschedulable)."""
    status: Obj = {"phase": "Running" if node_name else "Pending"}
    if not node_name:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    spec: Obj = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{ns}-{name}",
            "resourceVersion": str(rv),
            "creationTimestamp": STAMP,
        },
        "spec": spec,
        "status": status,
    }
