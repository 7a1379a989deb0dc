"""Draining on a real control plane: the apiserver's Eviction API enforces PodDisruptionBudgets.

kwok plays the kubelet of the simulated Nodes: pods turn Running and Ready (so a PDB counts
them healthy), and an evicted pod goes once its terminationGracePeriodSeconds have passed
(most pods here use 0, so an eviction removes them at once).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from karpenter.aio.clock import RealClock
from karpenter.controllers.node_termination import EXCLUDE_LB
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.operator import Operator
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

PVCS, VOLUMEATTACHMENTS = kc.PVCS, kc.VOLUMEATTACHMENTS
PDBS = kc.Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)


def _daemonset(name: str, pool: str) -> dict[str, Any]:
    template = harness.pod(name, pool, cpu="100m")
    template["metadata"] = {"labels": {"ds": name}}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"ds": name}}, "template": template},
    }


def _pdb(name: str, max_unavailable: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": "e2e"}}},
    }


async def _pods_bound(kube: kc.KubeClient, ns: str, count: int) -> list[dict[str, Any]]:
    async def bound() -> list[dict[str, Any]]:
        pods, _ = await kube.list(kc.PODS, ns)
        return pods if len(pods) == count and all(p["spec"].get("nodeName") for p in pods) else []

    result: list[dict[str, Any]] = await harness.eventually(bound, f"{count} pods bound")
    return result


async def _only_claim(kube: kc.KubeClient, pool: str) -> dict[str, Any]:
    async def registered() -> list[dict[str, Any]]:
        claims = await harness.claims_of(kube, pool)
        return claims if claims and all(c["status"].get("nodeName") for c in claims) else []

    claims = await harness.eventually(registered, "registered NodeClaims")
    assert len(claims) == 1, [c["metadata"]["name"] for c in claims]
    claim: dict[str, Any] = claims[0]
    return claim


async def _ready(kube: kc.KubeClient, ns: str, name: str) -> None:
    """Wait until kwok reports the pod Running and Ready (a PDB counts only Ready pods, and
    the Eviction API skips PDBs for Pending ones)."""

    async def ready() -> bool:
        pod = await kube.get(kc.PODS, name, ns)
        return pod["status"].get("phase") == "Running" and codec.condition_true(pod, "Ready")

    await harness.eventually(ready, f"kwok to run {name}")


async def _pdb_settled(kube: kc.KubeClient, ns: str, name: str, allowed: int) -> None:
    async def settled() -> bool:
        pdb = await kube.get(PDBS, name, ns)
        status = pdb.get("status") or {}
        return (
            status.get("observedGeneration") == pdb["metadata"]["generation"]
            and status.get("disruptionsAllowed") == allowed
            and status.get("currentHealthy") == 1
        )

    await harness.eventually(settled, f"PDB {name} to allow {allowed} disruptions")


async def _events(kube: kc.KubeClient, name: str, reason: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(
        kc.EVENTS, field_selector=f"involvedObject.name={name},reason={reason}"
    )
    return items


async def _gone(kube: kc.KubeClient, res: kc.Resource, name: str, ns: str | None = None) -> bool:
    try:
        await kube.get(res, name, ns)
    except errors.NotFound:
        return True
    return False


async def _finalized(op: Operator, kube: kc.KubeClient, claim: dict[str, Any]) -> None:
    name, node = claim["metadata"]["name"], claim["status"]["nodeName"]

    async def done() -> bool:
        return await _gone(kube, kc.NODECLAIMS, name) and await _gone(kube, kc.NODES, node)

    await harness.eventually(done, "the NodeClaim and its Node to be finalized")
    assert node in op.node_termination.finalized
    assert isinstance(op.cloud, SimulatedCloud)
    assert await op.cloud.records.get(name) is None


def _sample(op: Operator, name: str, **labels: str) -> float:
    return op.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.mark.asyncio
async def test_drain_evicts_tier_by_tier_then_removes_node_and_instance(
    control_plane: ControlPlane,
) -> None:
    """Workloads, then DaemonSet pods, then critical pods are evicted; a pod tolerating the
    disrupted taint stays; then the Node and its instance go."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        critical = harness.pod("critical", pool, cpu="100m")
        critical["spec"]["priorityClassName"] = "system-cluster-critical"
        stays = harness.pod("stays", pool, cpu="100m")
        stays["spec"]["tolerations"].append({"key": lbl.TAINT_DISRUPTED, "operator": "Exists"})
        for body in (harness.pod("web-0", pool, "100m"), harness.pod("web-1", pool, "100m")):
            await kube.create(kc.PODS, body, ns)
        await kube.create(kc.PODS, critical, ns)
        await kube.create(kc.PODS, stays, ns)
        await kube.create(kc.DAEMONSETS, _daemonset("agent", pool), ns)
        pods = await _pods_bound(kube, ns, 5)
        for pod in pods:
            await _ready(kube, ns, pod["metadata"]["name"])
        agent = next(p["metadata"]["name"] for p in pods if "ds" in p["metadata"]["labels"])
        claim = await _only_claim(kube, pool)
        node = await kube.get(kc.NODES, claim["status"]["nodeName"])
        assert lbl.FINALIZER_TERMINATION in node["metadata"]["finalizers"]

        await kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])
        await _finalized(op, kube, claim)

        drained = [k for k in op.node_termination.drained_pods if k.startswith(f"{ns}/")]
        assert sorted(drained[:2]) == [f"{ns}/web-0", f"{ns}/web-1"]
        assert drained[2:] == [f"{ns}/{agent}", f"{ns}/critical"]
        assert await _gone(kube, kc.PODS, "web-0", ns)
        assert await _events(kube, "web-0", "Evicted")
        nodepool = {"nodepool": pool}
        assert _sample(op, "karpenter_nodes_drained_total", **nodepool) == 1
        zone = node["metadata"]["labels"].get(lbl.ZONE, "")
        assert _sample(op, "karpenter_nodes_terminated_total", **nodepool, zone=zone) == 1
        assert _sample(op, "karpenter_nodes_termination_duration_seconds_count", **nodepool) == 1
        assert _sample(op, "karpenter_pods_drained_total", reason="Forceful Termination") >= 4
        assert _sample(op, "karpenter_pods_eviction_requests_total", code="200") >= 4
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_drain_waits_out_the_evicted_pods_grace_period(control_plane: ControlPlane) -> None:
    """An evicted pod with a 4 s grace period terminates for those 4 s (kwok ends it at its
    deletionTimestamp, as a kubelet would); the Node is not removed before it is gone."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        slow = harness.pod("slow", pool)
        slow["spec"]["terminationGracePeriodSeconds"] = 4
        await kube.create(kc.PODS, slow, ns)
        await _pods_bound(kube, ns, 1)
        await _ready(kube, ns, "slow")
        claim = await _only_claim(kube, pool)
        node = claim["status"]["nodeName"]

        await kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])

        async def terminating() -> float | None:
            pod = await kube.get(kc.PODS, "slow", ns)
            return codec.parse_time(pod["metadata"].get("deletionTimestamp"))

        ends = await harness.eventually(terminating, "the pod evicted and terminating")
        assert not await _gone(kube, kc.NODES, node)
        await harness.eventually(lambda: _gone(kube, kc.PODS, "slow", ns), "the pod gone")
        assert RealClock().now() >= ends - 1  # not before its grace ran out (whole seconds)
        await _finalized(op, kube, claim)
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_pdb_blocks_eviction_until_relaxed(control_plane: ControlPlane) -> None:
    """A PDB allowing no disruption refuses the eviction (429 → FailedDraining) and holds the
    Node, tainted and draining, until the PDB is relaxed."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("guarded", pool), ns)
        await _pods_bound(kube, ns, 1)
        await _ready(kube, ns, "guarded")
        await kube.create(PDBS, _pdb("guard", 0), ns)
        await _pdb_settled(kube, ns, "guard", 0)
        claim = await _only_claim(kube, pool)
        name, node_name = claim["metadata"]["name"], claim["status"]["nodeName"]

        await kube.delete(kc.NODECLAIMS, name)

        async def refused() -> bool:
            return bool(await _events(kube, node_name, "FailedDraining"))

        await harness.eventually(refused, "a FailedDraining event on the Node")
        assert await _events(kube, name, "FailedDraining")
        assert _sample(op, "karpenter_pods_eviction_requests_total", code="429") >= 1
        node = await kube.get(kc.NODES, node_name)
        assert node["metadata"].get("deletionTimestamp")
        assert {"key": lbl.TAINT_DISRUPTED, "effect": "NoSchedule"} in node["spec"]["taints"]
        assert node["metadata"]["labels"][EXCLUDE_LB] == "karpenter"
        held = await kube.get(kc.NODECLAIMS, name)
        drained = codec.condition(held, "Drained")
        assert drained is not None
        assert (drained["status"], drained["reason"]) == ("Unknown", "Draining")
        pod = await kube.get(kc.PODS, "guarded", ns)
        assert not pod["metadata"].get("deletionTimestamp")

        # maxUnavailable needs a scalable controller to count against; a bare pod is counted
        # by minAvailable
        relaxed = {"spec": {"maxUnavailable": None, "minAvailable": 0}}
        await kube.merge_patch(PDBS, "guard", relaxed, ns)
        await _finalized(op, kube, claim)
        assert await _gone(kube, kc.PODS, "guarded", ns)
        assert f"{ns}/guarded" in op.node_termination.drained_pods
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_do_not_disrupt_pod_holds_the_drain(control_plane: ControlPlane) -> None:
    """Without a terminationGracePeriod a do-not-disrupt pod is never evicted; the Node waits
    until the annotation is gone."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        keep = harness.pod("keep", pool)
        keep["metadata"]["annotations"] = {lbl.DO_NOT_DISRUPT: "true"}
        await kube.create(kc.PODS, keep, ns)
        await _pods_bound(kube, ns, 1)
        claim = await _only_claim(kube, pool)

        await kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])
        # longer than the 5 s minimum drain time: without the pod the Node would be gone
        await harness.eventually(lambda: _condition_set(kube, claim, "Drained"), "Draining")
        await anyio.sleep(6.5)
        assert not await _gone(kube, kc.NODES, claim["status"]["nodeName"])
        pod = await kube.get(kc.PODS, "keep", ns)
        assert not pod["metadata"].get("deletionTimestamp")
        assert f"{ns}/keep" not in op.node_termination.drained_pods

        patch = {"metadata": {"annotations": {lbl.DO_NOT_DISRUPT: None}}}
        await kube.merge_patch(kc.PODS, "keep", patch, ns)
        await _finalized(op, kube, claim)
        assert f"{ns}/keep" in op.node_termination.drained_pods
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_termination_grace_period_forces_deletion_at_the_deadline(
    control_plane: ControlPlane,
) -> None:
    """With terminationGracePeriod 6s, PDB-guarded and do-not-disrupt pods are deleted at the
    deadline (Disrupted events) and the Node goes then, not before."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        body = harness.nodepool(pool)
        body["spec"]["template"]["spec"]["terminationGracePeriod"] = "6s"
        await kube.create(kc.NODEPOOLS, body)
        keep = harness.pod("keep", pool)
        keep["metadata"]["annotations"] = {lbl.DO_NOT_DISRUPT: "true"}
        keep["metadata"]["labels"] = {"app": "other"}
        await kube.create(kc.PODS, keep, ns)
        await kube.create(kc.PODS, harness.pod("guarded", pool), ns)
        await _pods_bound(kube, ns, 2)
        await _ready(kube, ns, "guarded")
        await kube.create(PDBS, _pdb("guard", 0), ns)
        await _pdb_settled(kube, ns, "guard", 0)
        claim = await _only_claim(kube, pool)
        name = claim["metadata"]["name"]

        await kube.delete(kc.NODECLAIMS, name)

        async def stamped() -> str:
            obj = await kube.get(kc.NODECLAIMS, name)
            return str(obj["metadata"].get("annotations", {}).get(lbl.TERMINATION_TIMESTAMP, ""))

        stamp = await harness.eventually(stamped, "the termination timestamp annotation")
        deadline = codec.parse_time(stamp)
        assert deadline is not None
        meta = (await kube.get(kc.NODECLAIMS, name))["metadata"]
        deleted = codec.parse_time(meta.get("deletionTimestamp"))
        assert deleted is not None and deadline == pytest.approx(deleted + 6)
        assert await _events(kube, name, "TerminationGracePeriodExpiring")
        assert await _events(kube, claim["status"]["nodeName"], "TerminationGracePeriodExpiring")

        await _finalized(op, kube, claim)
        assert RealClock().now() >= deadline - 1  # timestamps are whole seconds
        for pod in ("keep", "guarded"):
            assert await _gone(kube, kc.PODS, pod, ns)
            assert await _events(kube, pod, "Disrupted")
        assert _sample(op, "karpenter_pods_eviction_requests_total", code="429") >= 1
        await harness.cleanup(kube, pool, ns)


async def _condition_set(kube: kc.KubeClient, claim: dict[str, Any], kind: str) -> bool:
    obj = await kube.get(kc.NODECLAIMS, claim["metadata"]["name"])
    return codec.condition(obj, kind) is not None


def _attachment(name: str, node: str, pv: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {
            "attacher": "e2e.csi.karpenter.test",
            "nodeName": node,
            "source": {"persistentVolumeName": pv},
        },
    }


@pytest.mark.asyncio
async def test_instance_waits_for_volume_detachment(control_plane: ControlPlane) -> None:
    """After the drain the Node waits for the VolumeAttachments of drained pods' volumes, not
    for those of a pod that stays (it tolerates the disrupted taint)."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("web", pool), ns)
        await _pods_bound(kube, ns, 1)
        claim = await _only_claim(kube, pool)
        node = claim["status"]["nodeName"]
        pvc = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "kept"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": f"pv-kept-{ns}",
                "storageClassName": "",
            },
        }
        await kube.create(PVCS, pvc, ns)
        stays = harness.pod("stays", pool, cpu="100m")
        stays["spec"]["nodeName"] = node  # placed like a kubelet-managed agent would be
        stays["spec"]["tolerations"].append({"key": lbl.TAINT_DISRUPTED, "operator": "Exists"})
        stays["spec"]["volumes"] = [
            {"name": "data", "persistentVolumeClaim": {"claimName": "kept"}}
        ]
        await kube.create(kc.PODS, stays, ns)
        drained_va, kept_va = f"va-drained-{ns}", f"va-kept-{ns}"
        await kube.create(VOLUMEATTACHMENTS, _attachment(drained_va, node, f"pv-web-{ns}"))
        await kube.create(VOLUMEATTACHMENTS, _attachment(kept_va, node, f"pv-kept-{ns}"))

        await kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])

        async def awaiting() -> bool:
            return bool(await _events(kube, node, "AwaitingVolumeDetachment"))

        await harness.eventually(awaiting, "an AwaitingVolumeDetachment event on the Node")
        held = await kube.get(kc.NODECLAIMS, claim["metadata"]["name"])
        assert codec.condition_true(held, "Drained")
        detached = codec.condition(held, "VolumesDetached")
        assert detached is not None and detached["status"] == "Unknown"
        assert not await _gone(kube, kc.NODES, node)
        assert f"{ns}/web" in op.node_termination.drained_pods

        await kube.delete(VOLUMEATTACHMENTS, drained_va)
        await _finalized(op, kube, claim)
        assert not await _gone(kube, VOLUMEATTACHMENTS, kept_va)  # never waited for
        assert f"{ns}/stays" not in op.node_termination.drained_pods
        await kube.delete(VOLUMEATTACHMENTS, kept_va)
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_not_ready_node_without_instance_is_released_without_drain(
    control_plane: ControlPlane,
) -> None:
    """A NotReady Node whose instance is already gone has nothing to drain: even a
    do-not-disrupt pod does not hold it."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        keep = harness.pod("keep", pool)
        keep["metadata"]["annotations"] = {lbl.DO_NOT_DISRUPT: "true"}
        await kube.create(kc.PODS, keep, ns)
        await _pods_bound(kube, ns, 1)
        claim = await _only_claim(kube, pool)
        node = claim["status"]["nodeName"]
        assert isinstance(op.cloud, SimulatedCloud)
        # the machine died with its kubelet: its record goes, its Node stays NotReady
        await op.cloud.records.delete(claim["metadata"]["name"])
        not_ready = {"type": "Ready", "status": "False", "reason": "NodeStatusUnknown"}
        status = {"status": {"conditions": [not_ready]}}
        await kube.merge_patch(kc.NODES, node, status, subresource="status")

        async def seen_not_ready() -> bool:
            raw = op.state.nodes.raw(node)
            return raw is not None and not codec.condition_true(raw, "Ready")

        await harness.eventually(seen_not_ready, "the mirror to see the Node NotReady")
        await kube.delete(kc.NODES, node)
        await _finalized(op, kube, claim)
        assert f"{ns}/keep" not in op.node_termination.drained_pods
        await harness.cleanup(kube, pool, ns)
