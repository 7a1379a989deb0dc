"""A small cluster built through the apiserver for the viewer and explain e2e tests.

One NodePool (the harness's: tainted, consolidation off) with one initialized Node holding two
pods (one annotated ``karpenter.sh/do-not-disrupt``), one NodeClaim launched onto that Node,
one NodeClaim still launching, a pod no instance type can hold and a pod that needs a new node.
No controller runs: what the tools print comes from these objects alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.kube import client as kc
from karpenter.kube import errors
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

PRICE = next(
    o.price
    for o in fake_instance_types(20)[2].offerings
    if (o.zone, o.capacity_type) == ("test-zone-2", "spot")
)


@dataclass(frozen=True)
class Scene:
    """Names of what was created."""

    pool: str
    ns: str
    node: str
    claim: str
    launching: str


def _node(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": pool,
                "karpenter.sh/registered": "true",
                "karpenter.sh/initialized": "true",
                "node.kubernetes.io/instance-type": "fake-it-2",
                "topology.kubernetes.io/zone": "test-zone-2",
                "karpenter.sh/capacity-type": "spot",
                harness.POOL_KEY: pool,
            },
        },
        "spec": {
            "providerID": f"simulated://{name}",
            "taints": [{"key": harness.POOL_KEY, "value": pool, "effect": "NoSchedule"}],
        },
    }


def _claim(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.test", "kind": "SimNodeClass", "name": "x"},
            "requirements": [],
        },
    }


def _bound(name: str, pool: str, node: str, cpu: str) -> dict[str, Any]:
    body = harness.pod(name, pool, cpu=cpu)
    body["spec"]["nodeName"] = node
    return body


async def _create(kube: kc.KubeClient, sc: Scene) -> None:
    await kube.create(
        kc.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": sc.ns}}
    )
    await kube.create(kc.NODEPOOLS, harness.nodepool(sc.pool))
    await kube.create(kc.NODES, _node(sc.node, sc.pool))
    status: dict[str, Any] = {"allocatable": {"cpu": "2900m", "memory": "6Gi", "pods": "30"}}
    status["capacity"] = status["allocatable"]
    status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    await kube.merge_patch(kc.NODES, sc.node, {"status": status}, subresource="status")
    for claim in (sc.claim, sc.launching):
        await kube.create(kc.NODECLAIMS, _claim(claim, sc.pool))
    launched = {"providerID": f"simulated://{sc.node}", "nodeName": sc.node}
    await kube.merge_patch(kc.NODECLAIMS, sc.claim, {"status": launched}, subresource="status")
    await kube.create(kc.PODS, _bound("web-1", sc.pool, sc.node, "1"), sc.ns)
    guarded = _bound("web-2", sc.pool, sc.node, "500m")
    guarded["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    await kube.create(kc.PODS, guarded, sc.ns)
    await kube.create(kc.PODS, harness.pod("huge", sc.pool, cpu="200"), sc.ns)
    await kube.create(kc.PODS, harness.pod("wide", sc.pool, cpu="2"), sc.ns)


async def _delete(kube: kc.KubeClient, sc: Scene) -> None:
    for res, name in (
        (kc.NAMESPACES, sc.ns),
        (kc.NODECLAIMS, sc.claim),
        (kc.NODECLAIMS, sc.launching),
        (kc.NODES, sc.node),
        (kc.NODEPOOLS, sc.pool),
    ):
        try:
            await kube.delete(res, name)
        except errors.NotFound:
            pass


@pytest.fixture
def scene(control_plane: ControlPlane) -> Iterator[Scene]:
    """The scene (module docstring), removed afterwards."""
    sc = Scene(
        harness.unique("scene"),
        harness.unique("e2e"),
        harness.unique("node"),
        harness.unique("claim"),
        harness.unique("launching"),
    )

    async def run(step: Any) -> None:
        async with kc.connect(control_plane.kubeconfig) as kube:
            await step(kube, sc)

    anyio.run(run, _create)
    try:
        yield sc
    finally:
        anyio.run(run, _delete)
