"""The cluster mirror: informer events in, decoded values and a core snapshot out."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.api import capacitybuffer
from karpenter.core import buffers
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.provisioning.existing import state_nodes
from karpenter.state.cluster import ClusterState, is_provisionable
from tests.support import rawobjects as raw

NOW = 1_767_225_700.0


def _pod(name: str, rv: int, *, unschedulable: bool = True, **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": str(rv),
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec},
        "status": status,
    }


def _claim(name: str, rv: int, provider_id: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "resourceVersion": str(rv),
            "labels": {"karpenter.sh/nodepool": "p"},
        },
        "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}},
        "status": {"providerID": provider_id} if provider_id else {},
    }


def _pool(name: str, rv: int = 1, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "resourceVersion": str(rv), **meta},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}}}},
    }


def test_events_update_values_and_notify_listeners() -> None:
    """ADDED/MODIFIED/DELETED keep the decoded pods current and each change is announced."""
    state = ClusterState()
    heard: list[tuple[str, str, bool]] = []
    state.subscribe(lambda kind, key, obj: heard.append((kind, key, obj is not None)))
    state.pods.apply("ADDED", _pod("a", 1))
    state.pods.apply("MODIFIED", _pod("a", 2, unschedulable=False))
    state.pods.apply("DELETED", _pod("a", 3))
    assert heard == [("Pod", "ns/a", True), ("Pod", "ns/a", True), ("Pod", "ns/a", False)]
    assert state.pods.values() == []


def test_a_late_event_never_overwrites_a_newer_write() -> None:
    """An older resourceVersion arriving after our own write (upsert) is ignored."""
    state = ClusterState()
    state.nodeclaims.upsert(_claim("c", 12, provider_id="sim://c"))
    state.nodeclaims.apply("ADDED", _claim("c", 10))
    claim = state.nodeclaims.get("c")
    assert claim is not None and claim.provider_id == "sim://c"


def test_relist_reports_objects_deleted_while_disconnected() -> None:
    """replace() drops what the new list lacks and tells listeners."""
    state = ClusterState()
    deleted: list[str] = []
    state.subscribe(lambda kind, key, obj: deleted.append(key) if obj is None else None)
    state.pods.replace([_pod("a", 1), _pod("b", 1)])
    state.pods.replace([_pod("b", 2)])
    assert deleted == ["ns/a"]
    assert [p.name for p in state.pods.values()] == ["b"]


def test_objects_that_do_not_decode_are_kept_out_of_values() -> None:
    """A pod with a bad quantity is recorded as invalid, not as a value."""
    state = ClusterState()
    bad = _pod("bad", 1)
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    state.pods.apply("ADDED", bad)
    assert state.pods.values() == []
    assert "invalid quantity" in state.pods.invalid["ns/bad"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, True, id="unschedulable"),
        pytest.param({"nodeName": "n1"}, False, id="bound"),
        pytest.param({"unschedulable": False}, False, id="not-yet-judged-by-scheduler"),
        pytest.param({"daemonset": True}, False, id="daemonset-pod"),
        pytest.param({"mirror": True}, False, id="mirror-pod"),
        pytest.param({"deleting": True}, False, id="deleting"),
    ],
)
def test_provisionable_pods(changes: dict[str, Any], expected: bool) -> None:
    """Upstream's IsProvisionable: Unschedulable, unbound, not DS/mirror (preempting:
    ``test_a_preempting_pod_waits_and_a_published_nomination_does_not``)."""
    spec = {"nodeName": changes["nodeName"]} if "nodeName" in changes else {}
    obj = _pod("p", 1, unschedulable=changes.get("unschedulable", True), **spec)
    if changes.get("daemonset"):
        obj["metadata"]["ownerReferences"] = [
            {"kind": "DaemonSet", "name": "ds", "apiVersion": "apps/v1"}
        ]
    if changes.get("mirror"):
        obj["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    if changes.get("deleting"):
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state = ClusterState()
    state.pods.apply("ADDED", obj)
    pod = state.pods.get("ns/p")
    assert pod is not None and is_provisionable(pod) is expected


@pytest.mark.parametrize(
    ("node", "victim", "expected"),
    [
        pytest.param(True, True, False, id="preemption-in-progress"),
        pytest.param(True, False, True, id="nominated-to-a-node-with-no-victims"),
        pytest.param(False, False, True, id="nominated-to-a-node-that-is-gone"),
    ],
)
def test_a_preempting_pod_waits_and_a_published_nomination_does_not(
    node: bool, victim: bool, expected: bool
) -> None:
    """A pod whose nominatedNodeName names a Node with a pod being deleted waits for the
    kube-scheduler's preemption (upstream skips every nominated pod). One nominated where
    nothing is being evicted (Karpenter's PublishNominations, or victims already gone) or to a
    Node that no longer exists stays provisionable: otherwise a nomination that cannot be
    honoured would strand the pod, since the scheduler keeps it until the pod binds."""
    state = ClusterState()
    if node:
        state.nodes.apply("ADDED", _node("n2", 1, "sim://n2"))
        bound = _pod("victim", 2, unschedulable=False, nodeName="n2")
        if victim:
            bound["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        state.pods.apply("ADDED", bound)
    obj = _pod("p", 3)
    obj["status"]["nominatedNodeName"] = "n2"
    state.pods.apply("ADDED", obj)
    pod = state.pods.get("ns/p")
    assert pod is not None and is_provisionable(pod)
    assert state.preempting(pod) is not expected
    assert [p.key for p in state.provisionable_pods()] == (["ns/p"] if expected else [])


def test_synced_waits_for_every_claim_to_launch() -> None:
    """A NodeClaim without a providerID makes the mirror unsynced (no solving around it)."""
    state = ClusterState()
    state.nodeclaims.apply("ADDED", _claim("c1", 1, provider_id="sim://c1"))
    assert state.synced()
    state.nodeclaims.apply("ADDED", _claim("c2", 2))
    assert not state.synced()


def test_snapshot_has_pools_with_types_and_skips_deleting_pools() -> None:
    """The core snapshot lists active NodePools that have instance types, plus pods/claims."""
    state = ClusterState()
    state.nodepools.apply("ADDED", _pool("keep"))
    state.nodepools.apply("ADDED", _pool("gone", deletionTimestamp="2026-01-01T00:00:00Z"))
    state.nodepools.apply("ADDED", _pool("untyped"))
    state.pods.apply("ADDED", _pod("a", 1))
    types = fake_instance_types(2)
    cluster = state.snapshot({"keep": types, "gone": types})
    assert [p.name for p in cluster.nodepools] == ["keep"]
    assert cluster.instance_types == {"keep": types}
    assert [p.name for p in cluster.pods] == ["a"]


def _node(name: str, rv: int, provider_id: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": str(rv)},
        "spec": {"providerID": provider_id},
    }


def test_nodes_are_found_by_provider_id_through_changes() -> None:
    """The providerID index follows adds, a changed providerID and deletes."""
    state = ClusterState()
    state.nodes.apply("ADDED", _node("n1", 1, "sim://a"))
    state.nodes.apply("ADDED", _node("n2", 1, "sim://b"))
    assert [n["metadata"]["name"] for n in state.node_by_provider_id("sim://a")] == ["n1"]
    state.nodes.apply("MODIFIED", _node("n1", 2, "sim://c"))
    assert state.node_by_provider_id("sim://a") == []
    assert [n["metadata"]["name"] for n in state.node_by_provider_id("sim://c")] == ["n1"]
    state.nodes.apply("DELETED", _node("n2", 3, "sim://b"))
    assert state.node_by_provider_id("sim://b") == []
    state.nodes.replace([])
    assert state.node_by_provider_id("sim://c") == []


def test_pods_opting_out_of_karpenter_are_not_provisionable() -> None:
    """``karpenter.sh/nodepool DoesNotExist`` in every required term drops the pod silently."""
    state = ClusterState()
    term = {"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    state.pods.apply("ADDED", _pod("out", 1, affinity=affinity))
    state.pods.apply("ADDED", _pod("in", 1))
    assert [p.name for p in state.provisionable_pods()] == ["in"]


def test_pods_by_node_index_follows_binds_and_deletes() -> None:
    """``pods_on`` answers from an index kept in step with every Pod event."""
    state = ClusterState()
    state.pods.apply("ADDED", _pod("a", 1))
    state.pods.apply("ADDED", _pod("b", 1, unschedulable=False, nodeName="n1"))
    assert state.pod_keys_on("n1") == ["ns/b"]
    state.pods.apply("MODIFIED", _pod("a", 2, unschedulable=False, nodeName="n1"))
    assert [p.name for p in state.pods_on("n1")] == ["a", "b"]
    state.pods.apply("DELETED", _pod("b", 3, unschedulable=False, nodeName="n1"))
    assert state.pod_keys_on("n1") == ["ns/a"]
    assert state.pod_keys_on("n2") == []


def test_claims_of_node_by_node_name_or_provider_id() -> None:
    """The claim of a Node is found by status.nodeName or providerID; the index follows
    updates and deletes."""
    state = ClusterState()
    claim = _claim("c", 1, provider_id="sim://c")
    state.nodeclaims.apply("ADDED", claim)
    assert state.claims_of_node("n1", "sim://c") == ["c"]
    assert state.claims_of_node("n1") == []
    named = {**claim, "metadata": {**claim["metadata"], "resourceVersion": "2"}}
    named["status"] = {"providerID": "sim://c", "nodeName": "n1"}
    state.nodeclaims.apply("MODIFIED", named)
    assert state.claims_of_node("n1") == ["c"]
    state.nodeclaims.apply("DELETED", named)
    assert state.claims_of_node("n1", "sim://c") == []


def test_capacity_buffer_virtual_pods_reach_the_snapshot_and_tell_listeners() -> None:
    """Virtual pods kept for a buffer are in every snapshot (by buffer key), listeners hear of a
    change but not of a write that changes nothing, and an empty set forgets the buffer."""
    state = ClusterState()
    heard: list[tuple[str, str]] = []
    state.subscribe(lambda kind, key, _obj: heard.append((kind, key)))
    body = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    chunk = capacitybuffer.chunk(body, "ns", "t")
    pods = {
        name: buffers.virtual_pods(buffers.Buffer("ns", name, chunk, replicas))
        for name, replicas in (("b", 1), ("a", 2))
    }
    assert state.virtual_pods.set("ns/b", pods["b"]) and state.virtual_pods.set("ns/a", pods["a"])
    assert not state.virtual_pods.set("ns/a", pods["a"])
    assert heard == [("VirtualPods", "ns/b"), ("VirtualPods", "ns/a")]
    snapshot = state.snapshot({})
    assert [p.name for p in snapshot.virtual_pods] == [
        "capacity-buffer-a-1",
        "capacity-buffer-a-2",
        "capacity-buffer-b-1",
    ]
    assert state.virtual_pods.set("ns/a", ())
    assert state.virtual_pods.of("ns/a") == ()
    assert [p.name for p in state.snapshot({}).virtual_pods] == ["capacity-buffer-b-1"]


def _created(pod: dict[str, Any], at: str) -> dict[str, Any]:
    pod["metadata"]["creationTimestamp"] = at
    return pod


def test_pods_in_motion_are_evicting_or_freshly_unjudged() -> None:
    """Pods on a Node being deleted (not the terminating ones, not DaemonSet pods) and pods the
    kube-scheduler has not judged that were created within the window are on the move; an
    older unjudged pod, a pod it judged Unschedulable and pods on live Nodes are not."""
    state = ClusterState()
    now = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    t0 = "2027-01-15T08:00:00Z"
    state.nodes.apply("ADDED", _node("live", 1, "sim://live"))
    draining = _node("draining", 1, "sim://draining")
    draining["metadata"]["deletionTimestamp"] = t0
    state.nodes.apply("ADDED", draining)
    state.pods.apply(
        "ADDED", _created(_pod("settled", 1, unschedulable=False, nodeName="live"), t0)
    )
    assert state.pods_in_motion(now, 10.0) == 0
    state.pods.apply(
        "ADDED", _created(_pod("evicting", 1, unschedulable=False, nodeName="draining"), t0)
    )
    going = _created(_pod("going", 1, unschedulable=False, nodeName="draining"), t0)
    going["metadata"]["deletionTimestamp"] = t0
    state.pods.apply("ADDED", going)
    ds = _created(_pod("ds", 1, unschedulable=False, nodeName="draining"), t0)
    ds["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": True}
    ]
    state.pods.apply("ADDED", ds)
    assert state.pods_in_motion(now, 10.0) == 1  # only "evicting"
    state.pods.apply(
        "ADDED", _created(_pod("fresh", 1, unschedulable=False), "2027-01-15T07:59:55Z")
    )
    state.pods.apply("ADDED", _created(_pod("old", 1, unschedulable=False), "2027-01-15T07:59:00Z"))
    state.pods.apply("ADDED", _created(_pod("judged", 1), "2027-01-15T07:59:58Z"))
    assert state.pods_in_motion(now, 10.0) == 2  # "evicting" and "fresh"
    state.nodes.apply("DELETED", draining)
    assert state.pods_in_motion(now, 10.0) == 1


def test_the_mirror_keeps_our_own_writes_without_managed_fields() -> None:
    """A write's response carries managedFields (the informer strips them from what it
    watches, not from what we write): the mirror's copy drops them, the caller's object is
    left as it was."""
    written = _claim("c", 5)
    written["metadata"]["managedFields"] = [{"manager": "karpenter", "fieldsV1": {}}]
    state = ClusterState()
    state.nodeclaims.upsert(written)
    raw = state.nodeclaims.raw("c")
    assert raw is not None and "managedFields" not in raw["metadata"]
    assert raw["metadata"]["labels"] == {"karpenter.sh/nodepool": "p"}
    assert "managedFields" in written["metadata"]


def test_a_claim_whose_node_the_cloud_created_is_nominated_by_the_node_name() -> None:
    """A pod planned on a claim is shown to the core under the name the core gives that claim's
    capacity: the claim's name while it has no Node, the Node's once the cloud created one with
    the claim's providerID (before registration names it in ``status.nodeName``; by the claim's
    name the pass found no such capacity and placed the pod by first fit), the registered
    Node's after that."""
    state = ClusterState()
    launched = raw.claim("ca")
    launched["status"] = {"providerID": "simulated://node-a"}
    state.nodeclaims.upsert(launched)
    state.nodeclaims.upsert(raw.claim("cb"))  # not launched yet
    state.nodeclaims.upsert(raw.claim("cc", node_name="node-c"))  # registered
    unregistered = [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]
    state.nodes.upsert(raw.node("node-a", taints=unregistered))  # providerID simulated://node-a
    state.nodes.upsert(raw.node("node-c"))
    for name, target in (("p", "ca"), ("q", "cb"), ("r", "cc")):
        state.pods.upsert(raw.pod(name))
        state.nominate(f"ns/{name}", target, until=NOW + 60)
    cluster = state.snapshot({}, NOW)
    nominated = {p.name: p.nominated_node_name for p in cluster.pods}
    assert nominated == {"p": "node-a", "q": "cb", "r": "node-c"}
    # the core's capacity answers to exactly those names
    names = {s.name for s in state_nodes(cluster, {})}
    assert names == {"node-a", "cb", "node-c"}
