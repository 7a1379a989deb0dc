"""The controller on a real control plane: pending pods become NodeClaims, Nodes, bound pods."""

from __future__ import annotations

from typing import Any

import aiohttp
import anyio
import pytest

from karpenter.aio.clock import RealClock
from karpenter.cloud.provider import OfferingRef
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.operator import Operator
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


def _ready(claim: dict[str, Any]) -> bool:
    return all(
        codec.condition_true(claim, c) for c in ("Launched", "Registered", "Initialized", "Ready")
    )


@pytest.mark.asyncio
async def test_pending_pods_get_nodes_and_are_bound(control_plane: ControlPlane) -> None:
    """Unschedulable pods → NodeClaims → Nodes → the kube-scheduler binds every pod."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        for i in range(6):
            await kube.create(kc.PODS, harness.pod(f"web-{i}", pool), ns)

        async def all_bound() -> bool:
            pods, _ = await kube.list(kc.PODS, ns)
            return len(pods) == 6 and all(p["spec"].get("nodeName") for p in pods)

        await harness.eventually(all_bound, "the scheduler to bind all six pods")

        async def all_ready() -> list[dict[str, Any]]:
            # the scheduler may bind as soon as a Node is Ready, a moment before the claim's
            # Initialized condition is written
            claims = await harness.claims_of(kube, pool)
            return claims if claims and all(_ready(c) for c in claims) else []

        claims = await harness.eventually(all_ready, "every NodeClaim Ready")
        assert 1 <= len(claims) <= 3
        pool_obj = await kube.get(kc.NODEPOOLS, pool)
        for claim in claims:
            meta = claim["metadata"]
            assert meta["name"].startswith(f"{pool}-")
            assert meta["ownerReferences"][0]["uid"] == pool_obj["metadata"]["uid"]
            assert meta["labels"][lbl.NODEPOOL] == pool
            assert lbl.NODEPOOL_HASH in meta["annotations"]
            assert lbl.FINALIZER_TERMINATION in meta["finalizers"]
            assert _ready(claim), claim["status"]
            node = await kube.get(kc.NODES, claim["status"]["nodeName"])
            labels = node["metadata"]["labels"]
            assert labels[lbl.REGISTERED] == "true"
            assert labels[lbl.INITIALIZED] == "true"
            assert labels[lbl.NODEPOOL] == pool
            assert node["spec"]["providerID"] == claim["status"]["providerID"]
            taints = {t["key"] for t in node["spec"].get("taints", [])}
            assert lbl.TAINT_UNREGISTERED not in taints
            assert harness.POOL_KEY in taints
        assert op.provisioner.passes
        await _assert_observable(op, pool)

        async def pool_status() -> bool:
            obj = await kube.get(kc.NODEPOOLS, pool)
            return (
                codec.condition_true(obj, "Ready")
                and codec.condition_true(obj, "ValidationSucceeded")
                and obj.get("status", {}).get("nodes") == len(claims)
                and "cpu" in obj["status"].get("resources", {})
            )

        await harness.eventually(pool_status, "the NodePool's Ready condition and node count")

        nodes = [c["status"]["nodeName"] for c in claims]
        await harness.cleanup(kube, pool, ns)
        for name in nodes:
            with pytest.raises(errors.NotFound):
                await kube.get(kc.NODES, name)


async def _assert_observable(op: Operator, pool: str) -> None:
    assert op.ports is not None
    metrics_port, health_port = op.ports
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
            text = await resp.text()
        async with http.get(f"http://127.0.0.1:{health_port}/readyz") as ready:
            assert ready.status == 200
    created = f'karpenter_nodeclaims_created_total{{min_values_relaxed="false",nodepool="{pool}"'
    assert created in text.replace('reason="provisioned",', "")
    assert f'karpenter_nodes_created_total{{nodepool="{pool}"' in text
    assert 'karpenter_cloudprovider_duration_seconds_count{controller="nodeclaim.lifecycle"' in text
    # the mirror's gauges: every bound pod's series names the pool, and the pool has usage
    pod_series = [line for line in text.splitlines() if line.startswith("karpenter_pods_state{")]
    assert (
        sum(f'nodepool="{pool}"' in line and 'scheduled="true"' in line for line in pod_series) == 6
    )
    assert f'karpenter_nodepools_usage{{nodepool="{pool}",resource_type="cpu"}}' in text


@pytest.mark.asyncio
async def test_deleting_a_node_deletes_its_nodeclaim(control_plane: ControlPlane) -> None:
    """A Node deleted out from under a registered NodeClaim is drained through its finalizer
    and takes the claim (and instance) away."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("solo", pool), ns)

        async def ready_claim() -> list[dict[str, Any]]:
            return [c for c in await harness.claims_of(kube, pool) if _ready(c)]

        first = (await harness.eventually(ready_claim, "a ready NodeClaim"))[0]

        async def bound() -> bool:
            return bool((await kube.get(kc.PODS, "solo", ns))["spec"].get("nodeName"))

        await harness.eventually(bound, "the pod bound, so there is something to drain")
        await kube.delete(kc.NODES, first["status"]["nodeName"])

        async def finalized() -> bool:
            names = [c["metadata"]["name"] for c in await harness.claims_of(kube, pool)]
            return first["metadata"]["name"] not in names

        await harness.eventually(finalized, "the claim to be deleted and finalized")

        async def recorded() -> bool:  # the claim is gone the moment its finalizer is released
            return first["metadata"]["name"] in op.termination.terminated

        await harness.eventually(recorded, "the termination controller to record it")
        assert f"{ns}/solo" in op.node_termination.drained_pods
        assert first["status"]["nodeName"] in op.node_termination.finalized
        assert isinstance(op.cloud, SimulatedCloud)
        assert await op.cloud.records.get(first["metadata"]["name"]) is None
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_nominated_events_are_sampled_at_upstreams_rate(control_plane: ControlPlane) -> None:
    """A burst of 40 pods placed in one pass posts Nominated Events at upstream's rate (burst
    10, then 5/s), not one per pod: every pod still gets its claim."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        for i in range(40):
            await kube.create(kc.PODS, harness.pod(f"p{i}", pool, cpu="100m"), ns)

        async def placed() -> bool:
            return all(f"{ns}/p{i}" in op.provisioner.placed_at for i in range(40))

        await harness.eventually(placed, "every pod placed on a claim")
        await anyio.sleep(1.0)  # the recorder's workers post in the background
        items, _ = await kube.list(kc.EVENTS, ns)
        nominated = [
            e
            for e in items
            if e["reason"] == "Nominated" and e.get("source", {}).get("component") == "karpenter"
        ]
        first = min(op.provisioner.created_at.values())
        elapsed = op.ctx.clock.now() - first
        assert 1 <= len(nominated) <= 10 + 5 * elapsed + 1, (len(nominated), elapsed)
        assert len(nominated) < 40
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_unservable_pod_gets_an_event_and_no_nodeclaim(control_plane: ControlPlane) -> None:
    """A pod no NodePool can serve gets a FailedScheduling Event from karpenter, no NodeClaim."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        body = harness.pod("lonely", pool, selector={"e2e.karpenter.test/nowhere": "true"})
        await kube.create(kc.PODS, body, ns)

        async def event() -> list[dict[str, Any]]:
            items, _ = await kube.list(kc.EVENTS, ns)
            return [
                e
                for e in items
                if e["involvedObject"]["name"] == "lonely"
                and e["reason"] == "FailedScheduling"
                and e.get("source", {}).get("component") == "karpenter"
            ]

        found = await harness.eventually(event, "karpenter's FailedScheduling event")
        assert found[0]["type"] == "Warning"
        assert "Failed to schedule pod" in found[0]["message"]
        assert await harness.claims_of(kube, pool) == []
        assert all(not p.created for p in op.provisioner.passes)
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_invalid_nodepool_is_rejected(control_plane: ControlPlane) -> None:
    """The apiserver refuses a NodePool with a restricted requirement key."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        bad = harness.nodepool(
            harness.unique("bad"),
            [{"key": "karpenter.sh/custom", "operator": "In", "values": ["x"]}],
        )
        with pytest.raises(errors.Invalid):
            await kube.create(kc.NODEPOOLS, bad)


@pytest.mark.asyncio
async def test_insufficient_capacity_deletes_the_claim_and_falls_back(
    control_plane: ControlPlane,
) -> None:
    """A launch refused for capacity: Event, claim deleted, offerings remembered; the next pass
    uses the other NodePool and the pods are bound."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        cloud = op.cloud
        assert isinstance(cloud, SimulatedCloud)
        cloud.advertise_unavailable = False  # the solver learns about it only from the launch
        cloud.mark_unavailable(
            OfferingRef(it.name, o.zone, o.capacity_type)
            for it in cloud.catalog
            for o in it.offerings
            if o.zone == "test-zone-1"
        )
        group = harness.unique("ice")
        zone1, zone2 = f"{group}-z1", f"{group}-z2"
        zone = "topology.kubernetes.io/zone"
        await kube.create(
            kc.NODEPOOLS,
            harness.nodepool(
                zone1,
                [{"key": zone, "operator": "In", "values": ["test-zone-1"]}],
                group=group,
                weight=100,
            ),
        )
        await kube.create(
            kc.NODEPOOLS,
            harness.nodepool(
                zone2, [{"key": zone, "operator": "In", "values": ["test-zone-2"]}], group=group
            ),
        )
        ns = await harness.namespace(kube)
        for i in range(2):
            await kube.create(kc.PODS, harness.pod(f"p-{i}", group), ns)

        async def bound() -> bool:
            pods, _ = await kube.list(kc.PODS, ns)
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        await harness.eventually(bound, "pods bound after the capacity error")
        assert await harness.claims_of(kube, zone1) == []
        assert len(await harness.claims_of(kube, zone2)) == 1
        remembered = op.state.unavailable.active(RealClock().now())
        assert ("fake-it-0", "test-zone-1", "spot") in remembered
        events, _ = await kube.list(kc.EVENTS, "default")
        ice = [e for e in events if e["reason"] == "InsufficientCapacityError"]
        assert any(e["involvedObject"]["name"].startswith(f"{zone1}-") for e in ice)
        await kube.delete(kc.NODEPOOLS, zone1)
        await harness.cleanup(kube, zone2, ns)


@pytest.mark.asyncio
async def test_deployment_replicas_get_nodes(control_plane: ControlPlane) -> None:
    """A Deployment's pods (made by the controller-manager) are provisioned for and bound."""
    async with (
        harness.running(control_plane.kubeconfig),
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        template = harness.pod("ignored", pool, cpu="1")
        template["metadata"] = {"labels": {"app": "web"}}
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": template["metadata"], "spec": template["spec"]},
            },
        }
        await kube.create(kc.DEPLOYMENTS, deployment, ns)

        async def bound() -> bool:
            pods, _ = await kube.list(kc.PODS, ns)
            return len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)

        await harness.eventually(bound, "the Deployment's four pods to be bound")
        assert await harness.claims_of(kube, pool)
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_bound_volume_zone_steers_the_nodeclaim(control_plane: ControlPlane) -> None:
    """A pod whose PVC is bound to a zonal PV gets capacity in that zone (the mirror carries
    PVCs and PVs to the solver)."""
    async with (
        harness.running(control_plane.kubeconfig),
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("vol")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        pv_name = harness.unique("pv")
        zone_term = {
            "matchExpressions": [{"key": lbl.ZONE, "operator": "In", "values": ["test-zone-2"]}]
        }
        await kube.create(
            kc.PVS,
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv_name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "csi": {"driver": "example.csi.test", "volumeHandle": pv_name},
                    "claimRef": {"namespace": ns, "name": "data"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [zone_term]}},
                },
            },
        )
        await kube.create(
            kc.PVCS,
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": pv_name,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
            ns,
        )
        pod = harness.pod("db", pool)
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        await kube.create(kc.PODS, pod, ns)

        async def zone() -> str:
            for claim in await harness.claims_of(kube, pool):
                node = (claim.get("status") or {}).get("nodeName")
                if node:
                    return str((await kube.get(kc.NODES, node))["metadata"]["labels"][lbl.ZONE])
            return ""

        assert await harness.eventually(zone, "a node for the volume's pod") == "test-zone-2"
        await harness.cleanup(kube, pool, ns)
        await kube.delete(kc.PVS, pv_name)
