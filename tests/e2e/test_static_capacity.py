"""Static NodePools on a real control plane: replicas held, never consolidated, limits kept."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from karpenter.kube import client as kc
from karpenter.kube import codec
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


def _static_pool(name: str, replicas: int, max_nodes: int | None = None) -> dict[str, Any]:
    body = harness.nodepool(name)
    body["spec"]["replicas"] = replicas
    # consolidation on and immediate: an ordinary pool would lose these empty nodes at once
    body["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
    if max_nodes is not None:
        body["spec"]["limits"] = {"nodes": str(max_nodes)}
    return body


async def _live(kube: kc.KubeClient, pool: str) -> list[dict[str, Any]]:
    claims = await harness.claims_of(kube, pool)
    return [c for c in claims if not codec.meta(c).get("deletionTimestamp")]


@pytest.mark.asyncio
async def test_replicas_are_held_and_scaled(control_plane: ControlPlane) -> None:
    """Two empty static nodes appear and stay through disruption passes; replicas 1 removes
    one; limits.nodes caps a larger count."""
    async with (
        harness.running(
            control_plane.kubeconfig,
            disruption_timing=(0.5, 1.0),
            FEATURE_GATES="StaticCapacity=true",
        ) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert op.static_capacity is not None
        pool = harness.unique("static")
        await kube.create(kc.NODEPOOLS, _static_pool(pool, 2))

        async def initialized(count: int) -> list[dict[str, Any]]:
            claims = await _live(kube, pool)
            ready = [c for c in claims if codec.condition_true(c, "Initialized")]
            return claims if len(claims) == count and len(ready) == count else []

        first = await harness.eventually(lambda: initialized(2), "two static nodes initialized")
        await anyio.sleep(3.0)  # several disruption passes with consolidateAfter 0s
        assert {c["metadata"]["name"] for c in await _live(kube, pool)} == {
            c["metadata"]["name"] for c in first
        }
        assert op.disruption.executed == []

        await kube.merge_patch(kc.NODEPOOLS, pool, {"spec": {"replicas": 1}})
        await harness.eventually(lambda: initialized(1), "scaled down to one")

        await kube.merge_patch(
            kc.NODEPOOLS, pool, {"spec": {"replicas": 5, "limits": {"nodes": "3"}}}
        )
        await harness.eventually(lambda: initialized(3), "three nodes: limits.nodes wins")
        await anyio.sleep(1.0)
        assert len(await _live(kube, pool)) == 3
        await harness.cleanup(kube, pool, await harness.namespace(kube))
