"""Pod nominations on a real control plane: each pod is bound where it was planned."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


def _nominated_by_karpenter(pod: dict[str, Any]) -> bool:
    return any(
        entry.get("manager") == lbl.FIELD_MANAGER
        and "f:nominatedNodeName" in (entry.get("fieldsV1") or {}).get("f:status", {})
        for entry in pod["metadata"].get("managedFields") or []
    )


@pytest.mark.asyncio
async def test_pods_are_nominated_to_their_planned_nodes_and_bound_there(
    control_plane: ControlPlane,
) -> None:
    """Every pod the provisioner placed on a new claim carries that claim's Node as its
    nominatedNodeName, written by Karpenter's field manager, and the kube-scheduler binds it
    there; the controller's mirror tells the nomination from a preemption."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("nom")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        for i in range(8):
            await kube.create(kc.PODS, harness.pod(f"web-{i}", pool, cpu="1"), ns)

        async def all_bound() -> list[dict[str, Any]]:
            pods, _ = await kube.list(kc.PODS, ns)
            return pods if len(pods) == 8 and all(p["spec"].get("nodeName") for p in pods) else []

        pods = await harness.eventually(all_bound, "the scheduler to bind all eight pods")
        nodes = {c["status"].get("nodeName") for c in await harness.claims_of(kube, pool)}
        for pod in pods:
            name = pod["metadata"]["name"]
            assert pod["status"].get("nominatedNodeName") == pod["spec"]["nodeName"], name
            assert pod["spec"]["nodeName"] in nodes, name
            assert _nominated_by_karpenter(pod), name
        key = f"{ns}/{pods[0]['metadata']['name']}"

        async def mirrored() -> bool:
            mirror = op.state.pods.get(key)
            return mirror is not None and mirror.nominated_by_karpenter

        await harness.eventually(mirrored, "the mirror to see Karpenter's nomination")
        await harness.cleanup(kube, pool, ns)
