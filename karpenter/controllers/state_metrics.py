"""Gauges that describe the cluster from the mirror: pods, NodePool limits and usage.

Fed by the cluster-state listener (no API calls, every replica), as upstream's
``metrics.pod`` and ``metrics.nodepool`` controllers are:

- ``karpenter_pods_state``: one series per pod, value 1, labelled with where it runs (node,
  its NodePool, zone, arch, capacity type, instance type) and its phase. A pod's old series is
  removed whenever its labels change, and when the pod or a label of its node changes.
- ``karpenter_pods_startup_duration_seconds``: Ready transition minus creation, observed once
  for each pod this replica saw Pending.
- ``karpenter_nodepools_limit`` / ``karpenter_nodepools_usage``: per resource of each NodePool
  (usage is the capacity of its NodeClaims that are not being deleted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.model import labels as lbl
from karpenter.kube import codec
from karpenter.kube.client import Obj

ARCH = "kubernetes.io/arch"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def _owner_link(meta: Mapping[str, Any]) -> str:
    owners = meta.get("ownerReferences") or []
    if not owners or not isinstance(owners[0], Mapping):
        return ""
    o = owners[0]
    kind = str(o.get("kind", "")).lower()
    namespace = meta.get("namespace", "")
    return f"/apis/{o.get('apiVersion', '')}/namespaces/{namespace}/{kind}s/{o.get('name', '')}"


class StateMetrics(Controller):
    """Keeps the pod and NodePool gauges in step with the mirror."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, "metrics.state")
        self._series: dict[str, tuple[str, ...]] = {}  # pod → its current label values
        self._pending: set[str] = set()  # pods seen Pending (startup duration candidates)
        self._pool_series: dict[str, set[tuple[str, str]]] = {}  # pool → (gauge, resource)
        # running usage sums, so a NodeClaim event costs its own size, not the cluster's
        self._claim_usage: dict[str, tuple[str, dict[str, int]]] = {}
        self._usage: dict[str, dict[str, int]] = {}
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "Pod":
            self._pod(key, obj)
        elif kind == "Node":
            for pod in self.state.pod_keys_on(key):
                self._pod(pod, self.state.pods.raw(pod))
        elif kind == "NodePool":
            self._pool(key)
        elif kind == "NodeClaim":
            for pool in self._claim(key):
                self._pool(pool)

    def _claim(self, key: str) -> set[str]:
        """Move the claim's capacity between pool sums; the pools whose sums changed."""
        touched = set()
        old = self._claim_usage.pop(key, None)
        if old is not None:
            pool, capacity = old
            sums = self._usage.setdefault(pool, {})
            for resource, amount in capacity.items():
                sums[resource] = sums.get(resource, 0) - amount
            touched.add(pool)
        claim = self.state.nodeclaims.get(key)
        if claim is not None and claim.nodepool and not claim.deleting:
            capacity = dict(claim.capacity)
            self._claim_usage[key] = (claim.nodepool, capacity)
            sums = self._usage.setdefault(claim.nodepool, {})
            for resource, amount in capacity.items():
                sums[resource] = sums.get(resource, 0) + amount
            touched.add(claim.nodepool)
        return touched

    # ---- pods -------------------------------------------------------------------------------

    def _pod(self, key: str, pod: Obj | None) -> None:
        if pod is None:
            old = self._series.pop(key, None)
            if old is not None:
                self.metrics.pods_state.remove(*old)
            self._pending.discard(key)
            return
        values = self._labels(pod)
        old = self._series.get(key)
        # Most pod events (a nomination, a condition's heartbeat) and every Node event
        # re-reading its pods leave the series as it was: prometheus_client's remove + labels
        # was 4% of the controller's CPU in a 1000-pod burst, for nothing.
        if old != values:
            if old is not None:
                self.metrics.pods_state.remove(*old)
            self._series[key] = values
            self.metrics.pods_state.labels(*values).set(1)
        self._startup(key, pod)

    def _labels(self, pod: Obj) -> tuple[str, ...]:
        meta = codec.meta(pod)
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        node = self.state.nodes.raw(node_name) if node_name else None
        node_labels = codec.meta(node).get("labels") or {} if node is not None else {}
        ready = codec.condition(pod, "Ready")
        return (
            str(meta.get("name", "")),
            str(meta.get("namespace", "")),
            _owner_link(meta),
            node_name,
            "true" if node_name else "false",
            str(node_labels.get(lbl.NODEPOOL, "")),
            str(node_labels.get(lbl.ZONE, "")),
            str(node_labels.get(ARCH, "")),
            str(node_labels.get(lbl.CAPACITY_TYPE, "")),
            str(node_labels.get(INSTANCE_TYPE, "")),
            str((pod.get("status") or {}).get("phase") or ""),
            "true" if ready is not None and ready.get("status") == "True" else "false",
            "true" if lbl.NODEPOOL in node_labels else "false",
        )

    def _startup(self, key: str, pod: Obj) -> None:
        if (pod.get("status") or {}).get("phase") == "Pending":
            self._pending.add(key)
            return
        ready = codec.condition(pod, "Ready")
        if key not in self._pending or ready is None or ready.get("status") != "True":
            return
        became = codec.parse_time(ready.get("lastTransitionTime"))
        created = codec.parse_time(codec.meta(pod).get("creationTimestamp"))
        if became is not None and created is not None:
            self.metrics.pods_startup_duration.observe(max(became - created, 0.0))
        self._pending.discard(key)

    # ---- nodepools --------------------------------------------------------------------------

    def _pool(self, name: str) -> None:
        for gauge, resource in self._pool_series.pop(name, set()):
            family = (
                self.metrics.nodepools_limit if gauge == "limit" else self.metrics.nodepools_usage
            )
            family.remove(resource, name)
        pool = self.state.nodepools.get(name)
        if pool is None:
            return
        series: set[tuple[str, str]] = set()
        for resource, amount in sorted((pool.limits or {}).items()):
            self.metrics.nodepools_limit.labels(resource, name).set(_number(amount))
            series.add(("limit", resource))
        for resource, amount in sorted(self._usage.get(name, {}).items()):
            self.metrics.nodepools_usage.labels(resource, name).set(_number(amount))
            series.add(("usage", resource))
        self._pool_series[name] = series


def _number(milli: int) -> float:
    """A core amount (milli-units) as the gauge's plain number (cores, bytes, pods)."""
    return milli / 1000
