"""kwok beside the local control plane: it adopts only annotated Nodes, and can be stopped and
started again (fault injection) without losing track of them."""

from __future__ import annotations

import uuid

import anyio
import pytest

from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


def _node(name: str, adopted: bool) -> dict[str, object]:
    annotations = {lbl.KWOK_NODE[0]: lbl.KWOK_NODE[1]} if adopted else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
    }


@pytest.mark.asyncio
async def test_kwok_adopts_annotated_nodes_and_survives_a_restart(
    control_plane: ControlPlane,
) -> None:
    """With kwok stopped an annotated Node stays unready; started again, kwok makes it Ready
    with the capacity it was created with; a Node without the annotation is never touched."""
    plane = control_plane.local
    adopted, foreign = f"kwok-{uuid.uuid4().hex[:6]}", f"hand-{uuid.uuid4().hex[:6]}"
    first_pid = plane.pid("kwok")
    await anyio.to_thread.run_sync(plane.stop_kwok)
    try:
        async with kc.connect(control_plane.kubeconfig) as kube:
            await kube.create(kc.NODES, _node(adopted, True))
            await kube.create(kc.NODES, _node(foreign, False))
            await anyio.sleep(2)
            assert codec.condition((await kube.get(kc.NODES, adopted)), "Ready") is None
    finally:
        await anyio.to_thread.run_sync(plane.start_kwok)
    assert plane.pid("kwok") not in (None, first_pid)
    async with kc.connect(control_plane.kubeconfig) as kube:

        async def ready() -> bool:
            return codec.condition_true(await kube.get(kc.NODES, adopted), "Ready")

        await harness.eventually(ready, "kwok to make the annotated Node Ready")
        node = await kube.get(kc.NODES, adopted)
        assert node["status"]["allocatable"]["cpu"] == "2"  # kept, not kwok's default
        assert codec.condition(await kube.get(kc.NODES, foreign), "Ready") is None
        for name in (adopted, foreign):
            await kube.delete(kc.NODES, name)
