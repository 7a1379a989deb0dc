"""Keeping the viewer's rows current from the mirror's change notifications.

The mirror tells us which object changed; only the rows it touches are rebuilt (a Node, the
NodeClaim(s) of that Node, the Node a pod is bound to), so a watch event costs one row, not a
pass over 2000 nodes. Rows are keyed ``node:<name>`` or, for a NodeClaim with no Node yet,
``claim:<name>``. Pending pods are tracked the same way. The pending pods' reasons come from
the provisioner's ``solve`` on a snapshot, run by ``app`` at most every couple of seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpenter.core.model import labels as lbl
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.pod import Pod
from karpenter.state.cluster import ClusterState
from karpenter.viewer import model
from karpenter.viewer.selector import Selector

WAITING = "waiting for the kube-scheduler to mark it Unschedulable"
DECIDING = "unschedulable; Karpenter's next pass decides (see karpenter explain pod)"


def _is_pending(pod: Pod | None) -> bool:
    return (
        pod is not None
        and not pod.node_name
        and pod.is_active()
        and not pod.is_daemonset_pod()
        and not pod.is_mirror_pod()
    )


def disruption_reason(claim_raw: Mapping[str, Any] | None, claim: NodeClaim | None) -> str:
    """Why a NodeClaim is being disrupted: its ``DisruptionReason`` condition, else drift."""
    for cond in ((claim_raw or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionReason" and cond.get("status") == "True":
            return str(cond.get("reason") or "")
    return "Drifted" if claim is not None and claim.drifted else ""


class Tracker:
    """Rows and pending pods of one mirror, rebuilt only where it changed."""

    def __init__(
        self,
        state: ClusterState,
        prices: model.PriceBook,
        *,
        nodepool: str = "",
        selector: Selector | None = None,
    ) -> None:
        self.state = state
        self.prices = prices
        self.nodepool = nodepool
        self.selector = selector or Selector()
        self.rows: dict[str, model.Row] = {}
        self.pending: set[str] = set()
        self._dirty: set[str] = set()
        self._pod_node: dict[str, str] = {}
        self._claim_node: dict[str, str] = {}
        self.rebuilt = 0  # rows rebuilt so far (the benchmark counts them)
        state.subscribe(self.on_change)

    def on_change(self, kind: str, key: str, obj: Mapping[str, Any] | None) -> None:
        """Mark what a change touches (a mirror listener: never blocks)."""
        if kind == "Node":
            self._dirty.add(f"node:{key}")
        elif kind == "NodeClaim":
            self._claim_changed(key)
        elif kind == "Pod":
            self._pod_changed(key)

    def _claim_changed(self, key: str) -> None:
        self._dirty.add(f"claim:{key}")
        claim = self.state.nodeclaims.get(key)
        old = self._claim_node.pop(key, "")
        new = claim.node_name if claim is not None else ""
        if new:
            self._claim_node[key] = new
        for node in {old, new} - {""}:
            self._dirty.add(f"node:{node}")

    def _pod_changed(self, key: str) -> None:
        pod = self.state.pods.get(key)
        old = self._pod_node.pop(key, "")
        new = pod.node_name if pod is not None else ""
        if new:
            self._pod_node[key] = new
        for node in {old, new} - {""}:
            self._dirty.add(f"node:{node}")
        if _is_pending(pod):
            self.pending.add(key)
        else:
            self.pending.discard(key)

    def refresh(self) -> list[model.Row]:
        """Rebuild dirty rows; every row, in key order."""
        # A Node change can move its claim's row away (or back), and a claim change its Node's
        # state: rebuild Nodes, then claims, until nothing new is marked.
        while self._dirty:
            dirty, self._dirty = self._dirty, set()
            for key in sorted(dirty):
                self._rebuild(key)
        return [self.rows[k] for k in sorted(self.rows)]

    def _rebuild(self, key: str) -> None:
        kind, _, name = key.partition(":")
        item = self._node_item(name) if kind == "node" else self._claim_item(name)
        self.rebuilt += 1
        if item is None:
            self.rows.pop(key, None)
            return
        labels = _labels(item.node, item.claim)
        if (self.nodepool and labels.get(lbl.NODEPOOL) != self.nodepool) or not (
            self.selector.matches(labels)
        ):
            self.rows.pop(key, None)
            return
        self.rows[key] = model.row(item, self.prices)

    def _node_item(self, name: str) -> model.NodeInput | None:
        node = self.state.nodes.get(name)
        claims = self.state.claims_of_node(name, node.provider_id if node is not None else "")
        # the claims' own rows come and go with the Node (a claim rebuild marks nothing more)
        self._dirty.update(f"claim:{c}" for c in claims)
        if node is None:
            return None
        claim = self.state.nodeclaims.get(claims[0]) if claims else None
        reason = disruption_reason(self.state.nodeclaims.raw(claims[0]), claim) if claims else ""
        return model.NodeInput(node, claim, self.state.pods_on(name), reason)

    def _claim_item(self, name: str) -> model.NodeInput | None:
        claim = self.state.nodeclaims.get(name)
        if claim is None:
            return None
        if claim.node_name and self.state.nodes.get(claim.node_name) is not None:
            return None
        if claim.provider_id and self.state.node_by_provider_id(claim.provider_id):
            return None
        return model.NodeInput(None, claim)

    def reprice(self, prices: model.PriceBook) -> None:
        """New prices from the provider: every row is rebuilt on the next refresh."""
        if prices != self.prices:
            self.prices = prices
            self._dirty.update(self.rows)

    def pending_pods(self) -> list[Pod]:
        """The pending pods' decoded values."""
        found = (self.state.pods.get(k) for k in sorted(self.pending))
        return [p for p in found if p is not None]


def _labels(node: Node | None, claim: NodeClaim | None) -> dict[str, str]:
    labels = dict(claim.labels) if claim is not None else {}
    if claim is not None and claim.nodepool:
        labels.setdefault(lbl.NODEPOOL, claim.nodepool)
    if node is not None:
        labels.update(node.labels)
    return labels
