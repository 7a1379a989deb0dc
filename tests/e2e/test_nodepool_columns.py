"""The NodePool as ``kubectl get nodepools`` shows it, and limits the schema refuses."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.kube import client as kc
from karpenter.kube import errors
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("limits", "field"),
    [
        pytest.param({"cpu": "-1"}, "spec.limits.cpu", id="negative-string"),
        pytest.param({"memory": "-16Gi"}, "spec.limits.memory", id="negative-binary"),
        pytest.param({"cpu": -4}, "spec.limits.cpu", id="negative-integer"),
    ],
)
async def test_negative_limits_are_rejected(
    control_plane: ControlPlane, limits: dict[str, Any], field: str
) -> None:
    """A negative limit is refused at admission, naming the field."""
    body = harness.nodepool(harness.unique("neg"))
    body["spec"]["limits"] = {"nodes": "3", **limits}
    async with kc.connect(control_plane.kubeconfig) as kube:
        with pytest.raises(errors.Invalid) as refused:
            await kube.create(kc.NODEPOOLS, body)
    assert field in refused.value.message


@pytest.mark.asyncio
async def test_non_negative_limits_are_accepted(control_plane: ControlPlane) -> None:
    """Zero, plain, suffixed and explicitly positive limits stay valid."""
    name = harness.unique("limits")
    body = harness.nodepool(name)
    body["spec"]["limits"] = {"cpu": 0, "memory": "16Gi", "nodes": "+3", "pods": "1e3"}
    async with kc.connect(control_plane.kubeconfig) as kube:
        created = await kube.create(kc.NODEPOOLS, body)
        await kube.delete(kc.NODEPOOLS, name)
    assert created["spec"]["limits"]["memory"] == "16Gi"


def _columns(table: dict[str, Any], name: str) -> dict[str, Any]:
    heads = [c["name"] for c in table["columnDefinitions"]]
    row = next(r for r in table["rows"] if r["cells"][0] == name)
    return dict(zip(heads, row["cells"], strict=True))


@pytest.mark.asyncio
async def test_kubectl_columns_show_nodes_and_quantities(control_plane: ControlPlane) -> None:
    """``kubectl get nodepools -o wide`` (the Table the apiserver serves) shows the node count
    and the pool's CPU and memory as Kubernetes quantities, as upstream writes them."""
    catalog = fake_instance_types(4)
    pool = harness.unique("cols")
    async with (
        kc.connect(control_plane.kubeconfig) as kube,
        harness.running(control_plane.kubeconfig, catalog_size=4),
    ):
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        for i in range(2):
            await kube.create(kc.PODS, harness.pod(f"app-{i}", pool, cpu="2"), ns)

        types = {it.name: it for it in catalog}

        async def expected() -> dict[str, str] | None:
            nodes, _ = await kube.list(kc.NODES, label_selector=f"karpenter.sh/nodepool={pool}")
            if len(nodes) < 2:
                return None
            labels = [n["metadata"]["labels"] for n in nodes]
            launched = [types[x["node.kubernetes.io/instance-type"]] for x in labels]
            cpu = sum(it.capacity["cpu"] for it in launched) // 1000
            memory_gi = sum(it.capacity["memory"] for it in launched) // 1000 // 2**30
            # a quantity, never raw bytes
            return {"Nodes": str(len(nodes)), "CPU": str(cpu), "Memory": f"{memory_gi}Gi"}

        async def shown() -> dict[str, Any] | None:
            want = await expected()
            cells = _columns(await kube.table(kc.NODEPOOLS), pool)
            if want is None or any(cells[k] != v for k, v in want.items()):
                return None
            return cells

        cells = await harness.eventually(shown, "the columns to show the pool's nodes")
        await harness.cleanup(kube, pool, ns)
    assert cells["Ready"] == "True"
    assert cells["NodeClass"] == "x"
