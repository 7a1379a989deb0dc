"""Startup taints go the way a real agent removes them: the node agent (a kwok Stage) takes
the NodePool's startupTaints off a Ready Node after a delay; until then the claim is not
initialized and pods that do not tolerate the taint wait."""

from __future__ import annotations

import pytest

from karpenter.kube import client as kc
from karpenter.kube import codec
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

AGENT_TAINT = "example.com/agent-not-ready"


@pytest.mark.asyncio
async def test_node_agent_removes_startup_taints_then_pods_run(
    control_plane: ControlPlane,
) -> None:
    """A Node registers with the startup taint; the agent removes it (and only it) after the
    delay; the claim initializes and the pod runs."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert isinstance(op.cloud, SimulatedCloud)
        op.cloud.startup_agent_delay_s = 3.0
        pool = harness.unique("agent")
        ns = await harness.namespace(kube)
        body = harness.nodepool(pool)
        body["spec"]["template"]["spec"]["startupTaints"] = [
            {"key": AGENT_TAINT, "effect": "NoSchedule"}
        ]
        await kube.create(kc.NODEPOOLS, body)
        await kube.create(kc.PODS, harness.pod("app", pool), ns)

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
        assert not codec.condition_true(claim, "Initialized")

        async def running() -> bool:
            pod = await kube.get(kc.PODS, "app", ns)
            return bool(pod["status"].get("phase") == "Running")

        await harness.eventually(running, "the pod Running once the agent removed the taint")
        final = await kube.get(kc.NODES, node)
        keys = {t["key"] for t in codec.taints_of(final)}
        assert AGENT_TAINT not in keys
        assert harness.POOL_KEY in keys  # the pool's own taint stays
        claim = (await harness.claims_of(kube, pool))[0]
        assert codec.condition_true(claim, "Initialized")
        await harness.cleanup(kube, pool, ns)
