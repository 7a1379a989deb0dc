"""Node repair on a real control plane: a node NotReady past its toleration is replaced."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.core.repair import RepairPolicy
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


def _deployment(pool: str) -> dict[str, Any]:
    template = harness.pod("x", pool, cpu="250m")
    template["metadata"] = {"labels": {"app": "repair"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "repair"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "repair"}},
            "template": template,
        },
    }


@pytest.mark.asyncio
async def test_not_ready_node_is_replaced(control_plane: ControlPlane) -> None:
    """Ready=False beyond the policy's toleration: the claim is stamped and deleted, the pod
    moves to a new node, and the repair is counted."""
    async with (
        harness.running(control_plane.kubeconfig, FEATURE_GATES="NodeRepair=true") as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert op.node_health is not None
        assert isinstance(op.cloud, SimulatedCloud)
        op.cloud.repair = (RepairPolicy("Ready", "False", 1.0),)
        pool = harness.unique("repair")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.DEPLOYMENTS, _deployment(pool), ns)

        async def bound_on() -> str:
            pods, _ = await kube.list(kc.PODS, ns)
            live = [p for p in pods if not codec.meta(p).get("deletionTimestamp")]
            return str(live[0]["spec"].get("nodeName") or "") if len(live) == 1 else ""

        first_node = await harness.eventually(bound_on, "the replica bound")
        [claim] = await harness.claims_of(kube, pool)
        name = claim["metadata"]["name"]
        await harness.mark_not_ready(
            kube, first_node, "KubeletNotReady", "container runtime is down"
        )

        async def moved() -> bool:
            try:
                await kube.get(kc.NODECLAIMS, name)
                return False
            except errors.NotFound:
                pass
            node = await bound_on()
            return bool(node) and node != first_node

        await harness.eventually(moved, "the broken node replaced and the pod moved", wait_s=60)
        assert op.node_health.repaired == [name]
        text = op.metrics.render().decode()
        assert "karpenter_nodeclaims_unhealthy_disrupted_total{capacity_type=" in text
        assert 'condition="Ready"' in text
        await harness.cleanup(kube, pool, ns)
