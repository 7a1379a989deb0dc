"""Startup taints go the way a real agent removes them: the node agent (a kwok Stage) takes
the NodePool's startupTaints off a Ready Node after a delay; until then the claim is not
initialized and pods that do not tolerate the taint wait."""

from __future__ import annotations

from functools import partial

import anyio
import pytest

from karpenter.aio.clock import RealClock
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

AGENT_TAINT = "example.com/agent-not-ready"


async def _tainted_pool(kube: kc.KubeClient, prefix: str) -> tuple[str, str]:
    """A NodePool whose template carries the agent's startup taint, and a pod ``app`` for it
    in a fresh namespace: (pool, namespace)."""
    pool = harness.unique(prefix)
    ns = await harness.namespace(kube)
    body = harness.nodepool(pool)
    body["spec"]["template"]["spec"]["startupTaints"] = [
        {"key": AGENT_TAINT, "effect": "NoSchedule"}
    ]
    await kube.create(kc.NODEPOOLS, body)
    await kube.create(kc.PODS, harness.pod("app", pool), ns)
    return pool, ns


async def _launched(kube: kc.KubeClient, pool: str) -> bool:
    claims = await harness.claims_of(kube, pool)
    return bool(claims) and bool(claims[0].get("status", {}).get("providerID"))


@pytest.mark.asyncio
async def test_node_agent_removes_startup_taints_then_pods_run(
    control_plane: ControlPlane,
) -> None:
    """A Node registers with the startup taint; the agent removes it (and only it) after the
    delay; the claim initializes and the pod runs."""
    async with (
        harness.running(control_plane.kubeconfig, agent_delay_s=3.0),
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool, ns = await _tainted_pool(kube, "agent")

        async def tainted_node() -> str:
            claims = await harness.claims_of(kube, pool)
            name = claims[0].get("status", {}).get("nodeName", "") if claims else ""
            if not name:
                return ""
            node = await kube.get(kc.NODES, name)
            keys = {t["key"] for t in codec.taints_of(node)}
            return name if AGENT_TAINT in keys and codec.condition_true(node, "Ready") else ""

        node = await harness.eventually(tainted_node, "a Ready node still carrying the taint")
        claim = (await harness.claims_of(kube, pool))[0]
        assert not codec.condition_true(claim, "Initialized"), (
            claim["status"],
            await kube.get(kc.NODES, node),
        )

        async def running() -> bool:
            pod = await kube.get(kc.PODS, "app", ns)
            return bool(pod["status"].get("phase") == "Running")

        await harness.eventually(running, "the pod Running once the agent removed the taint")
        final = await kube.get(kc.NODES, node)
        keys = {t["key"] for t in codec.taints_of(final)}
        assert AGENT_TAINT not in keys
        assert harness.POOL_KEY in keys  # the pool's own taint stays

        async def initialized() -> bool:
            # the pod may run before the claim's status says so: the scheduler needs only the
            # taint gone, the lifecycle pass writing Initialized comes on its own time
            return codec.condition_true((await harness.claims_of(kube, pool))[0], "Initialized")

        await harness.eventually(initialized, "the claim Initialized")
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_agent_done_before_a_late_registration_keeps_its_taint_off(
    control_plane: ControlPlane,
) -> None:
    """The controller is down from launch until after the node agent removed the startup
    taint (a crash between boot and registration): when it comes back it registers the Node
    without putting the startup taint back, so the claim initializes and the pod runs (found
    by the simulated crash experiment, tests/faults/simcrash.py)."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        pool, ns = await _tainted_pool(kube, "agentfirst")

        # launch only: the instance boots 3 s later, by which time this controller is gone
        async with harness.running(control_plane.kubeconfig, boot_delay_s=3.0, agent_delay_s=0.5):
            await harness.eventually(partial(_launched, kube, pool), "the claim launched")
        claim = (await harness.claims_of(kube, pool))[0]
        name = codec.name(claim)
        assert not codec.condition_true(claim, "Registered")

        # the cloud alone boots the instance; kwok readies it and its agent removes the taint
        cloud = SimulatedCloud(kube, fake_instance_types(8), RealClock())
        async with anyio.create_task_group() as tg:
            await tg.start(cloud.run)

            async def agent_done() -> bool:
                try:
                    node = await kube.get(kc.NODES, name)
                except errors.NotFound:
                    return False
                keys = {t["key"] for t in codec.taints_of(node)}
                return codec.condition_true(node, "Ready") and AGENT_TAINT not in keys

            await harness.eventually(agent_done, "the agent removed the taint, unregistered")
            tg.cancel_scope.cancel()

        async with harness.running(control_plane.kubeconfig):

            async def running() -> bool:
                pod = await kube.get(kc.PODS, "app", ns)
                return bool(pod["status"].get("phase") == "Running")

            await harness.eventually(running, "the pod Running on the late-registered node", 60)
            keys = {t["key"] for t in codec.taints_of(await kube.get(kc.NODES, name))}
            assert AGENT_TAINT not in keys and harness.POOL_KEY in keys
            await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_relaunch_pass_that_registers_keeps_startup_taints(
    control_plane: ControlPlane,
) -> None:
    """A controller killed after the launch but before writing it finds, on restart, the
    instance booted and its Node Ready: the pass that launches again (idempotently) and
    registers the Node does not initialize it while the startup taint is still on, so the
    pod waits for that node and no second NodeClaim is made (found by the simulated crash
    experiment, tests/faults/simcrash.py: a duplicate launch)."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        pool, ns = await _tainted_pool(kube, "relaunch")

        # the taint stays through the test
        async with harness.running(control_plane.kubeconfig, boot_delay_s=3.0, agent_delay_s=20.0):
            await harness.eventually(partial(_launched, kube, pool), "the claim launched")
        name = codec.name((await harness.claims_of(kube, pool))[0])
        # the kill beat the status write: the claim does not know it was launched
        gone = dict.fromkeys(("conditions", "providerID", "imageID", "capacity", "allocatable"))
        await kube.merge_patch(kc.NODECLAIMS, name, {"status": gone}, subresource="status")

        cloud = SimulatedCloud(kube, fake_instance_types(8), RealClock())
        async with anyio.create_task_group() as tg:
            await tg.start(cloud.run)

            async def node_ready() -> bool:
                try:
                    return codec.condition_true(await kube.get(kc.NODES, name), "Ready")
                except errors.NotFound:
                    return False

            await harness.eventually(node_ready, "the instance booted and Ready")
            tg.cancel_scope.cancel()

        async with harness.running(control_plane.kubeconfig):

            async def registered() -> bool:
                claims = await harness.claims_of(kube, pool)
                return any(codec.condition_true(c, "Registered") for c in claims)

            await harness.eventually(registered, "the claim launched again and registered")
            await anyio.sleep(5.0)  # a provisioning pass or two
            claims = await harness.claims_of(kube, pool)
            assert [codec.name(c) for c in claims] == [name]
            assert not codec.condition_true(claims[0], "Initialized")
            await harness.cleanup(kube, pool, ns)
