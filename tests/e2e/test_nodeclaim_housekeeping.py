"""NodeClaim housekeeping on a real control plane: lastPodEventTime and garbage collection."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


async def _one_ready_claim(kube: kc.KubeClient, pool: str, ns: str, pods: int) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        bound, _ = await kube.list(kc.PODS, ns)
        claims = await harness.claims_of(kube, pool)
        if len(bound) == pods and all(p["spec"].get("nodeName") for p in bound) and claims:
            return claims[0] if codec.condition_true(claims[0], "Registered") else None
        return None

    claim: dict[str, Any] = await harness.eventually(ready, "pods bound to a registered claim")
    return claim


def _scheduled_at(pod: dict[str, Any]) -> float:
    cond = codec.condition(pod, "PodScheduled")
    assert cond is not None and cond["status"] == "True"
    when = codec.parse_time(cond["lastTransitionTime"])
    assert when is not None
    return when


@pytest.mark.asyncio
async def test_last_pod_event_time_follows_binds_and_deletes(control_plane: ControlPlane) -> None:
    """Binding stamps the PodScheduled time; a pod starting to terminate moves it later."""
    async with (
        harness.running(control_plane.kubeconfig),
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("events")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        for i in range(2):
            await kube.create(kc.PODS, harness.pod(f"app-{i}", pool, cpu="100m"), ns)
        claim = await _one_ready_claim(kube, pool, ns, 2)
        name = claim["metadata"]["name"]
        pods, _ = await kube.list(kc.PODS, ns)
        latest_bind = max(_scheduled_at(p) for p in pods)

        async def stamped(after: float) -> float | None:
            obj = await kube.get(kc.NODECLAIMS, name)
            when = codec.parse_time((obj.get("status") or {}).get("lastPodEventTime"))
            return when if when is not None and when >= after else None

        first = await harness.eventually(lambda: stamped(latest_bind), "lastPodEventTime set")
        assert first == latest_bind  # the bind's own time, to the second
        await anyio.sleep(1.1)  # the stored time has whole seconds
        before_delete = RealClock().now()
        # grace > 0 so the pod is seen terminating before it is gone (kwok ends it after 3 s)
        await kube.delete(kc.PODS, "app-0", ns, grace_period_s=3)
        moved = await harness.eventually(
            lambda: stamped(int(before_delete)), "lastPodEventTime moved by the terminating pod"
        )
        assert moved > first
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_gc_deletes_claims_whose_instance_vanished(control_plane: ControlPlane) -> None:
    """A vanished instance with a Ready Node is kept; once the Node is NotReady it is collected."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("gc")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("app", pool, cpu="100m"), ns)
        claim = await _one_ready_claim(kube, pool, ns, 1)
        name = claim["metadata"]["name"]
        node = claim["status"]["nodeName"]
        cloud = op.cloud
        assert isinstance(cloud, SimulatedCloud)
        await op.nodeclaim_gc.reconcile()
        assert name not in op.nodeclaim_gc.collected  # its instance is listed

        await cloud.records.delete(name)  # the instance disappears behind Karpenter's back
        await op.nodeclaim_gc.reconcile()
        assert name not in op.nodeclaim_gc.collected  # the Ready Node says the list is wrong

        await harness.mark_not_ready(
            kube, node, "NodeStatusUnknown", "kubelet stopped posting node status"
        )

        async def seen_not_ready() -> bool:
            raw = op.state.nodes.raw(node)
            cond = codec.condition(raw, "Ready") if raw else None
            return cond is not None and cond["status"] == "False"

        await harness.eventually(seen_not_ready, "the mirror to see the Node NotReady")
        await op.nodeclaim_gc.reconcile()
        assert op.nodeclaim_gc.collected == [name]

        async def gone() -> bool:
            try:
                await kube.get(kc.NODECLAIMS, name)
            except errors.NotFound:
                return True
            return False

        await harness.eventually(gone, "the collected claim finalized and gone")
        text = op.metrics.render().decode()
        assert 'reason="garbage_collected"' in text
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_binds_in_a_burst_cost_one_write_per_window(control_plane: ControlPlane) -> None:
    """Pods binding to one node a second apart are not one status write each: writes to a
    NodeClaim are at least 10 s apart (upstream's dedupe), and the latest bind's time is
    still the one stored once the window ends."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("burst")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("app-0", pool, cpu="100m"), ns)
        claim = await _one_ready_claim(kube, pool, ns, 1)
        name = claim["metadata"]["name"]
        for i in range(1, 5):
            await anyio.sleep(1.1)  # each bind in its own second
            await kube.create(kc.PODS, harness.pod(f"app-{i}", pool, cpu="100m"), ns)
        await _one_ready_claim(kube, pool, ns, 5)
        pods, _ = await kube.list(kc.PODS, ns)
        binds = sorted({_scheduled_at(p) for p in pods})
        assert len(binds) >= 4 and {p["spec"]["nodeName"] for p in pods} == {name}

        async def latest() -> bool:
            obj = await kube.get(kc.NODECLAIMS, name)
            stored = codec.parse_time((obj.get("status") or {}).get("lastPodEventTime"))
            return stored == binds[-1]

        await harness.eventually(latest, "the latest bind's time stored", wait_s=40)
        assert op.podevents.writes <= 3 < len(binds)
        await harness.cleanup(kube, pool, ns)
