"""Existing capacity as the solver sees it: Nodes and in-flight NodeClaims merged into one view.

A NodeClaim and its Node are one "state node": the Node's labels, taints and allocatable when it
has registered, the NodeClaim's otherwise (an in-flight claim still counts as capacity, so a pass
does not launch twice for the same pods). Uninitialized managed nodes ignore their startup and
ephemeral taints, since those are expected to go away. A managed Node without a NodeClaim stands
for a NodeClaim of its NodePool, so the pool's startup taints are the ones it ignores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.pod import Pod
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms
from karpenter.core.scheduling.taints import NO_EXECUTE, NO_SCHEDULE, Taint

EPHEMERAL_TAINTS = (
    Taint("node.kubernetes.io/not-ready", NO_SCHEDULE),
    Taint("node.kubernetes.io/not-ready", NO_EXECUTE),
    Taint("node.kubernetes.io/unreachable", NO_SCHEDULE),
    Taint("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE, "true"),
    Taint(lbl.TAINT_UNREGISTERED, NO_EXECUTE),
)


def is_ephemeral(taint: Taint) -> bool:
    """Taints a booting node carries for a while (ignored until it is initialized)."""
    return taint.key.startswith("readiness.k8s.io/") or any(
        taint.key == e.key and taint.effect == e.effect for e in EPHEMERAL_TAINTS
    )


@dataclass(frozen=True, slots=True)
class StateNode:
    """One unit of existing capacity (a Node, a NodeClaim, or both)."""

    name: str
    node: Node | None
    claim: NodeClaim | None
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: res.Resources
    capacity: res.Resources
    pods: tuple[Pod, ...] = field(default_factory=tuple)
    pool_startup_taints: tuple[Taint, ...] = ()  # only for a managed Node without a NodeClaim
    _requirements: Requirements | None = field(default=None, compare=False, repr=False)

    @property
    def nodepool(self) -> str:
        """The managing NodePool ('' for unmanaged nodes)."""
        return self.labels.get(lbl.NODEPOOL) or (self.claim.nodepool if self.claim else "")

    @property
    def hostname(self) -> str:
        """The hostname label, falling back to the name."""
        return self.labels.get(lbl.HOSTNAME, self.name)

    @property
    def initialized(self) -> bool:
        """Unmanaged nodes count as initialized; managed ones need the label or condition."""
        if self.node is not None and self.node.labels.get(lbl.INITIALIZED) == "true":
            return True
        if self.claim is not None:
            return self.claim.initialized
        return not self.nodepool

    @property
    def deleting(self) -> bool:
        """Marked for deletion (Node or NodeClaim has a deletionTimestamp)."""
        return bool((self.node and self.node.deleting) or (self.claim and self.claim.deleting))

    def same_objects(self, other: StateNode) -> bool:
        """Built from the very same Node, NodeClaim and Pod objects as ``other``.

        Snapshots a plan derives from one another keep the objects of untouched nodes, so
        whatever was computed from them still holds.
        """
        return (
            self.node is other.node
            and self.claim is other.claim
            and self.pool_startup_taints == other.pool_startup_taints
            and len(self.pods) == len(other.pods)
            and all(x is y for x, y in zip(self.pods, other.pods, strict=True))
        )

    @property
    def ready(self) -> bool:
        """The Node is Ready (an unregistered NodeClaim is not)."""
        return self.node is not None and self.node.ready

    @property
    def requirements(self) -> Requirements:
        """Labels as requirements, hostname included (computed once: solves ask often)."""
        if self._requirements is None:
            labels = dict(self.labels)
            labels.setdefault(lbl.HOSTNAME, self.name)
            object.__setattr__(self, "_requirements", Requirements.from_labels(labels))
        assert self._requirements is not None
        return self._requirements

    def scheduling_taints(self) -> tuple[Taint, ...]:
        """Taints pods must tolerate here (startup/ephemeral ignored while uninitialized)."""
        if self.initialized or not self.nodepool:
            return self.taints
        startup = self.claim.startup_taints if self.claim else self.pool_startup_taints
        # Taints are unique by key and effect (the Node API's own matching), so a startup taint
        # whose value changed on the node is still the startup taint.
        keys = {(t.key, t.effect) for t in startup}
        return tuple(
            t for t in self.taints if not is_ephemeral(t) and (t.key, t.effect) not in keys
        )

    def requested(self) -> dict[str, int]:
        """Summed requests of the active pods bound here."""
        return res.add(*(p.requests for p in self.pods if p.is_active()))


def _claim_labels(claim: NodeClaim) -> dict[str, str]:
    labels = dict(claim.labels)
    try:
        reqs = from_selector_terms(claim.requirements)
    except ValueError:
        reqs = Requirements()
    for key, value in reqs.single_values().items():
        labels.setdefault(key, value)
    if claim.nodepool:
        labels.setdefault(lbl.NODEPOOL, claim.nodepool)
    return labels


def _claim_resources(
    claim: NodeClaim, labels: Mapping[str, str], types: Mapping[str, InstanceType]
) -> tuple[res.Resources, res.Resources]:
    if claim.allocatable:
        return claim.allocatable, claim.capacity or claim.allocatable
    it = types.get(labels.get(lbl.INSTANCE_TYPE, ""))
    if it is not None:
        return it.allocatable, it.capacity
    return claim.requests, claim.requests


def state_nodes(cluster: Cluster, types: Mapping[str, InstanceType]) -> list[StateNode]:
    """Merge Nodes and NodeClaims (matched by providerID or node name) with their pods."""
    by_node: dict[str, list[Pod]] = {}
    for pod in cluster.pods:
        if pod.node_name:
            by_node.setdefault(pod.node_name, []).append(pod)
    nodes_by_pid = {n.provider_id: n for n in cluster.nodes if n.provider_id}
    nodes_by_name = {n.name: n for n in cluster.nodes}
    matched: set[str] = set()
    startup = {p.name: p.template.startup_taints for p in cluster.nodepools}
    out = []
    for claim in cluster.nodeclaims:
        node = nodes_by_pid.get(claim.provider_id) if claim.provider_id else None
        node = node or (nodes_by_name.get(claim.node_name) if claim.node_name else None)
        if node is not None:
            matched.add(node.name)
            out.append(_merge(node, claim, by_node))
            continue
        labels = _claim_labels(claim)
        alloc, cap = _claim_resources(claim, labels, types)
        taints = (*claim.taints, *claim.startup_taints)
        out.append(StateNode(claim.name, None, claim, labels, taints, alloc, cap, ()))
    for node in cluster.nodes:
        if node.name not in matched:
            pool_taints = startup.get(node.labels.get(lbl.NODEPOOL, ""), ())
            out.append(_merge(node, None, by_node, pool_taints))
    return out


def _merge(
    node: Node,
    claim: NodeClaim | None,
    by_node: Mapping[str, Sequence[Pod]],
    pool_startup_taints: tuple[Taint, ...] = (),
) -> StateNode:
    labels = dict(claim.labels) if claim else {}
    labels.update(node.labels)
    alloc, cap = node.allocatable or node.capacity, node.capacity or node.allocatable
    initialized = node.labels.get(lbl.INITIALIZED) == "true" or (claim and claim.initialized)
    if claim is not None and claim.allocatable and not initialized:
        # A Node registers before its kubelet has reported (all of) its status; until the claim
        # is initialized its launch-time shape is the truth, as upstream's state node. Reading
        # the bare Node here made a pass see no room and launch twice (docs/reliability.md).
        alloc, cap = claim.allocatable, claim.capacity or claim.allocatable
    return StateNode(
        node.name,
        node,
        claim,
        labels,
        node.taints,
        alloc,
        cap,
        tuple(by_node.get(node.name, ())),
        pool_startup_taints,
    )
