"""The cluster mirror: what the informers saw, decoded once, and the snapshot the core decides on.

Only informers write here (through one ``KindStore`` sink per resource); controllers read, and
the provisioner adds the NodeClaims it has just created so the next pass counts them before
their watch event arrives. All updates are synchronous: nothing awaits while the mirror is
half-changed. Listeners hear about every change (kind, name, raw object or None when deleted)
and must not block: they mark work for their controller and return.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import structlog

from karpenter.api import decode
from karpenter.api.capacitybuffer import BufferSpec
from karpenter.api.compact import compact
from karpenter.api.pdb import UnresolvedBudget
from karpenter.core.disruption.candidates import reschedulable
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, DaemonSet, NodeOverlay, PodDisruptionBudget
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from karpenter.state.unavailable import UnavailableOfferings
from karpenter.state.virtualpods import VirtualPods

T = TypeVar("T")
Obj = dict[str, Any]
Listener = Callable[[str, str, Obj | None], None]

_log = structlog.get_logger()


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return f"{ns}/{name}" if ns else name


def _version(obj: Mapping[str, Any]) -> int:
    # resourceVersions are etcd revisions: opaque by contract, integers in practice. Comparing
    # them keeps a late watch event from overwriting what this process has just written.
    try:
        return int(_meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


@dataclass(slots=True)
class Entry(Generic[T]):
    """A raw object and its decoded value (None when it does not decode)."""

    raw: Obj
    value: T | None


@dataclass
class KindStore(Generic[T]):
    """The mirror of one resource: raw objects by key, decoded by ``decode``; an informer sink."""

    kind: str
    decode: Callable[[Obj], T]
    notify: Callable[[str, str, Obj | None], None]
    entries: dict[str, Entry[T]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)

    def replace(self, objects: Sequence[Obj]) -> None:
        """A relist: keep exactly ``objects``; report what vanished while we were not watching."""
        fresh = {_key(o): o for o in objects}
        for key in sorted(set(self.entries) - set(fresh)):
            self._remove(key)
        for key in sorted(fresh):
            self._put(key, fresh[key])

    def apply(self, event: str, obj: Obj) -> None:
        """One watch event."""
        key = _key(obj)
        if event == "DELETED":
            self._remove(key)
            return
        current = self.entries.get(key)
        if current is None or _version(current.raw) < _version(obj):
            self._put(key, obj)

    def upsert(self, obj: Obj) -> None:
        """Record an object this process just wrote, unless a newer version is already here."""
        key = _key(obj)
        current = self.entries.get(key)
        if current is None or _version(current.raw) < _version(obj):
            self._put(key, obj)

    def _put(self, key: str, obj: Obj) -> None:
        current = self.entries.get(key)
        if current is not None and _version(current.raw) == _version(obj) and _version(obj):
            return
        # The mirror holds every object for the controller's life: a compact copy shares
        # repeated strings and drops what a write's response carries besides (managedFields).
        obj = compact(obj)
        try:
            value: T | None = self.decode(obj)
            self.invalid.pop(key, None)
        except decode.CodecError as err:
            value = None
            if self.invalid.get(key) != str(err):
                _log.warning("object does not decode", kind=self.kind, key=key, error=str(err))
            self.invalid[key] = str(err)
        self.entries[key] = Entry(obj, value)
        self.notify(self.kind, key, obj)

    def _remove(self, key: str) -> None:
        if self.entries.pop(key, None) is not None:
            self.invalid.pop(key, None)
            self.notify(self.kind, key, None)

    def values(self) -> list[T]:
        """Decoded values, in key order."""
        return [e.value for _, e in sorted(self.entries.items()) if e.value is not None]

    def unordered(self) -> Iterator[T]:
        """Decoded values in no particular order: for counts and checks polled often, which
        must not pay for ``values``' sort."""
        return (e.value for e in self.entries.values() if e.value is not None)

    def raw(self, key: str) -> Obj | None:
        """The raw object by key."""
        entry = self.entries.get(key)
        return entry.raw if entry is not None else None

    def get(self, key: str) -> T | None:
        """The decoded value by key."""
        entry = self.entries.get(key)
        return entry.value if entry is not None else None


def is_provisionable(pod: Pod) -> bool:
    """Upstream's rule: the scheduler said Unschedulable, unbound, not a DaemonSet or mirror
    pod, and still alive (whether it is preempting needs the cluster: ``preempting``)."""
    return pod.unschedulable_condition and _pending_workload(pod)


def awaits_scheduler(pod: Pod) -> bool:
    """Pending, not judged by the default kube-scheduler yet, and otherwise what upstream's rule
    would provision once the scheduler says Unschedulable (see ``Provisioner``'s early rule)."""
    return pod.awaiting_scheduler and _pending_workload(pod) and not opts_out(pod)


def _pending_workload(pod: Pod) -> bool:
    """Unbound, not a DaemonSet or mirror pod, still alive."""
    return (
        not pod.node_name
        and not pod.is_daemonset_pod()
        and not pod.is_mirror_pod()
        and pod.is_active()
    )


def _discard(index: dict[str, set[str]], key: str, member: str) -> None:
    """Take ``member`` out of ``index[key]``, and the key out once its set is empty (the
    mirror's reverse indexes must not keep a key per object ever seen)."""
    members = index.get(key)
    if members is not None:
        members.discard(member)
        if not members:
            del index[key]


def opts_out(pod: Pod) -> bool:
    """The pod requires ``karpenter.sh/nodepool DoesNotExist`` in every required node-affinity
    term: it is configured never to run on a Karpenter node, so it is dropped silently."""
    terms = pod.required_node_terms
    return bool(terms) and all(
        any(key == lbl.NODEPOOL and op == "DoesNotExist" for key, op, _, _ in term)
        for term in terms
    )


class ClusterState:
    """Pods, Nodes, NodeClaims, NodePools and DaemonSets as last seen by the informers."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self.version = 0  # bumped on every change: "has anything changed since I looked?"
        # providerID → Node names, kept in step before listeners run (reconciles look it up)
        self._provider_nodes: dict[str, set[str]] = {}
        self._node_provider: dict[str, str] = {}
        # node → pod keys bound to it, and back: "which pods are on this node" without a scan
        self._node_pods: dict[str, set[str]] = {}
        self._pod_node: dict[str, str] = {}
        # NodeClaims by their status.providerID and status.nodeName: "the claim of this Node"
        # without a scan of every claim on each Node event
        self._claims_by: dict[str, set[str]] = {}
        self._claim_ids: dict[str, tuple[str, ...]] = {}
        self.pods: KindStore[Pod] = KindStore("Pod", decode.pod, self._notify)
        self.nodes: KindStore[Node] = KindStore("Node", decode.node, self._notify)
        self.nodeclaims: KindStore[NodeClaim] = KindStore(
            "NodeClaim", decode.node_claim, self._notify
        )
        self.nodepools: KindStore[NodePool] = KindStore("NodePool", decode.node_pool, self._notify)
        self.daemonsets: KindStore[DaemonSet] = KindStore(
            "DaemonSet", decode.daemonset, self._notify
        )
        # What scheduling and disruption read besides the above: PDBs (disruption blockers),
        # volumes (topology and CSI limits), namespace labels (namespaceSelector terms) and
        # NodeOverlays (price and capacity adjustments, behind the NodeOverlay gate).
        self.pdbs: KindStore[PodDisruptionBudget | UnresolvedBudget] = KindStore(
            "PodDisruptionBudget", decode.pdb, self._notify
        )
        self.pvcs: KindStore[PersistentVolumeClaim] = KindStore(
            "PersistentVolumeClaim", decode.pvc, self._notify
        )
        self.pvs: KindStore[PersistentVolume] = KindStore(
            "PersistentVolume", decode.pv, self._notify
        )
        self.storage_classes: KindStore[StorageClass] = KindStore(
            "StorageClass", decode.storage_class, self._notify
        )
        self.csinodes: KindStore[CSINode] = KindStore("CSINode", decode.csinode, self._notify)
        self.namespaces: KindStore[dict[str, str]] = KindStore(
            "Namespace", decode.namespace_labels, self._notify
        )
        self.overlays: KindStore[NodeOverlay] = KindStore(
            "NodeOverlay", decode.node_overlay, self._notify
        )
        # CapacityBuffers (behind their feature gate): the buffers and PodTemplates the
        # informers deliver, and the virtual pods the buffer controller resolved from them.
        self.capacity_buffers: KindStore[BufferSpec] = KindStore(
            "CapacityBuffer", decode.capacity_buffer, self._notify
        )
        self.pod_templates: KindStore[Mapping[str, Any]] = KindStore(
            "PodTemplate", decode.pod_template, self._notify
        )
        self.virtual_pods = VirtualPods(lambda key: self._notify("VirtualPods", key, None))
        self.unavailable = UnavailableOfferings()
        # pod key → (node or NodeClaim the provisioner placed it on, until when)
        self.nominations: dict[str, tuple[str, float]] = {}
        # and back: target → pod keys (a registration asks for its claim's pods without a scan
        # of every nomination: 4000 registrations × 20k pending pods would be quadratic)
        self._nominated_to: dict[str, set[str]] = {}

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(kind, key, raw_or_None)`` after every change."""
        self._listeners.append(listener)

    def _notify(self, kind: str, key: str, obj: Obj | None) -> None:
        self.version += 1
        if kind == "Node":
            self._index_node(key, obj)
        elif kind == "Pod":
            self._index_pod(key, obj)
        elif kind == "NodeClaim":
            self._index_claim(key, obj)
        for listener in self._listeners:
            listener(kind, key, obj)

    def _index_node(self, name: str, obj: Obj | None) -> None:
        old = self._node_provider.pop(name, "")
        if old:
            _discard(self._provider_nodes, old, name)
        new = str(((obj or {}).get("spec") or {}).get("providerID") or "")
        if obj is not None and new:
            self._node_provider[name] = new
            self._provider_nodes.setdefault(new, set()).add(name)

    def _index_pod(self, key: str, obj: Obj | None) -> None:
        old = self._pod_node.pop(key, "")
        if old:
            _discard(self._node_pods, old, key)
        node = str(((obj or {}).get("spec") or {}).get("nodeName") or "")
        if obj is not None and node:
            self._pod_node[key] = node
            self._node_pods.setdefault(node, set()).add(key)

    def _index_claim(self, key: str, obj: Obj | None) -> None:
        for ident in self._claim_ids.pop(key, ()):
            _discard(self._claims_by, ident, key)
        status = (obj or {}).get("status") or {}
        pairs = (("id:", status.get("providerID")), ("node:", status.get("nodeName")))
        idents = tuple(f"{prefix}{value}" for prefix, value in pairs if obj is not None and value)
        if idents:
            self._claim_ids[key] = idents
            for ident in idents:
                self._claims_by.setdefault(ident, set()).add(key)

    # ---- queries ------------------------------------------------------------------------------

    def claims_of_node(self, node: str, provider_id: str = "") -> list[str]:
        """Names of the decodable NodeClaims whose status names this Node (by nodeName) or its
        providerID, sorted (more than one is an error upstream reports)."""
        names = set(self._claims_by.get(f"node:{node}", ()))
        if provider_id:
            names |= self._claims_by.get(f"id:{provider_id}", set())
        return sorted(n for n in names if self.nodeclaims.get(n) is not None)

    def pod_keys_on(self, node: str) -> list[str]:
        """Keys of the pods bound to ``node`` (kept in step before listeners run), sorted."""
        return sorted(self._node_pods.get(node, ()))

    def pods_on(self, node: str) -> list[Pod]:
        """The decoded pods bound to ``node``."""
        found = (self.pods.get(k) for k in self.pod_keys_on(node))
        return [p for p in found if p is not None]

    def provisionable_pods(self, early: AbstractSet[str] = frozenset()) -> list[Pod]:
        """Pods Karpenter should find capacity for: upstream's rule, plus the pods keyed in
        ``early`` that still await the kube-scheduler's verdict (in key order)."""
        return [
            p
            for p in self.pods.values()
            if (
                (is_provisionable(p) and not opts_out(p))
                or (p.key in early and awaits_scheduler(p))
            )
            and not self.preempting(p)
        ]

    def preempting(self, pod: Pod) -> bool:
        """The pod waits for pods the kube-scheduler preempted for it: its
        ``nominatedNodeName`` names a Node on which a bound pod is being deleted (upstream
        skips every nominated pod; a nomination Karpenter published, or one whose node is
        gone, leaves the pod provisionable, and the pass puts it back on that node first)."""
        target = pod.nominated_node_name
        if not target or self.nodes.raw(target) is None:
            return False
        return any(p.deleting for p in self.pods_on(target))

    def pods_in_motion(self, now: float, recent_s: float) -> int:
        """Pods the kube-scheduler is about to place: those still bound to a Node being
        deleted (the termination finalizer evicts them, and their owners recreate them), and
        those created within ``recent_s`` that it has not judged yet (an older unjudged pod is
        left to the provisioner's early rule: counting it would hold disruption forever)."""
        draining = {n.name for n in self.nodes.unordered() if n.deleting}
        draining |= {c.node_name for c in self.nodeclaims.unordered() if c.deleting and c.node_name}
        evicting = sum(1 for node in draining for p in self.pods_on(node) if reschedulable(p))
        unjudged = sum(
            1 for p in self.pods.unordered() if awaits_scheduler(p) and now - p.creation <= recent_s
        )
        return evicting + unjudged

    def synced(self) -> bool:
        """Every known NodeClaim has launched (has a providerID) or is going away.

        Upstream waits for in-flight launches before the next pass; a claim without a
        provider id has no known shape yet, and solving around it risks a duplicate launch.
        """
        # unordered on purpose: the provisioner polls this every 50 ms while launches land
        return all(c.provider_id or c.deleting for c in self.nodeclaims.unordered())

    def node_by_provider_id(self, provider_id: str) -> list[Obj]:
        """Raw Nodes with this providerID (more than one is an error upstream reports)."""
        names = sorted(self._provider_nodes.get(provider_id, ()))
        return [raw for raw in (self.nodes.raw(n) for n in names) if raw is not None]

    def nominate(self, pod_key: str, target: str, until: float) -> None:
        """Record that the provisioner placed a pending pod on ``target`` (a Node or NodeClaim
        name) until ``until``: disruption leaves such nodes alone while the pod binds."""
        previous = self.nominations.get(pod_key)
        if previous is not None:
            _discard(self._nominated_to, previous[0], pod_key)
        self.nominations[pod_key] = (target, until)
        self._nominated_to.setdefault(target, set()).add(pod_key)

    def nominated_to(self, targets: Collection[str]) -> list[str]:
        """Keys of the pods the provisioner placed on any of ``targets`` (live nominations and
        those expired since the last pass), in key order."""
        found: set[str] = set()
        for target in targets:
            found |= self._nominated_to.get(target, set())
        return sorted(found)

    def with_nominations(self, pods: Sequence[Pod], now: float) -> tuple[Pod, ...]:
        """``pods`` with live nominations as ``nominated_node_name`` (by Node name, or by
        NodeClaim name while the claim has no Node)."""
        for key in [k for k, (_, until) in self.nominations.items() if until <= now]:
            _discard(self._nominated_to, self.nominations.pop(key)[0], key)
        out = []
        for pod in pods:
            entry = self.nominations.get(pod.key)
            if entry is None or pod.node_name or pod.nominated_node_name:
                out.append(pod)
                continue
            out.append(replace(pod, nominated_node_name=self._nominee(entry[0])))
        return tuple(out)

    def _nominee(self, target: str) -> str:
        """The name the core knows ``target`` by: a claim's Node once the claim names it, or
        once the cloud's Node carries its providerID (the core merges them by providerID, and
        names the merge after the Node, before registration writes ``status.nodeName``: by the
        claim's name the pass found no such node, and placed the pod by first fit again)."""
        claim = self.nodeclaims.get(target)
        if claim is None:
            return target
        if claim.node_name:
            return claim.node_name
        nodes = self._provider_nodes.get(claim.provider_id) if claim.provider_id else None
        return min(nodes) if nodes else target

    def active_nodepools(self) -> list[NodePool]:
        """NodePools that decoded and are not being deleted."""
        return [
            e.value
            for _, e in sorted(self.nodepools.entries.items())
            if e.value is not None and not _meta(e.raw).get("deletionTimestamp")
        ]

    def snapshot(
        self, instance_types: Mapping[str, tuple[InstanceType, ...]], now: float | None = None
    ) -> Cluster:
        """An immutable core view (NodePools limited to those with instance types); with
        ``now``, pending pods carry the provisioner's live nominations."""
        pools = tuple(p for p in self.active_nodepools() if p.name in instance_types)
        pods = tuple(self.pods.values())
        if now is not None:
            pods = self.with_nominations(pods, now)
        # Namespaces the informer has not delivered (or when it is not run) still carry the
        # label every namespace has, so namespaceSelector terms on the name keep working.
        labels: dict[str, Mapping[str, str]] = {
            ns: {"kubernetes.io/metadata.name": ns} for ns in sorted({p.namespace for p in pods})
        }
        for name, entry in self.namespaces.entries.items():
            if entry.value is not None:
                labels[name] = entry.value
        return Cluster(
            nodepools=pools,
            instance_types={p.name: instance_types[p.name] for p in pools},
            nodes=tuple(self.nodes.values()),
            nodeclaims=tuple(self.nodeclaims.values()),
            pods=pods,
            daemonsets=tuple(self.daemonsets.values()),
            pdbs=tuple(
                b.resolve(pods) if isinstance(b, UnresolvedBudget) else b
                for b in self.pdbs.values()
            ),
            pvcs=tuple(self.pvcs.values()),
            pvs=tuple(self.pvs.values()),
            storage_classes=tuple(self.storage_classes.values()),
            csinodes=tuple(self.csinodes.values()),
            overlays=tuple(self.overlays.values()),
            namespace_labels=labels,
            virtual_pods=self.virtual_pods.all(),
        )
