"""Informers on the real apiserver: list then watch into a sink, and 410 Gone as a typed error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest

from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from karpenter.kube import errors
from karpenter.kube.informers import Informer
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

CONFIGMAPS = kc.Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)


class RecordingSink:
    """Keeps what an informer delivered."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[str, str]] = []
        self.replaced = 0

    def replace(self, objects: Sequence[dict[str, Any]]) -> None:
        self.replaced += 1
        self.objects = {o["metadata"]["name"]: o for o in objects}

    def apply(self, event: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.events.append((event, name))
        if event == "DELETED":
            self.objects.pop(name, None)
        else:
            self.objects[name] = obj


def _cm(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": value},
    }


@pytest.mark.asyncio
async def test_informer_lists_then_follows_changes(control_plane: ControlPlane) -> None:
    """Objects present before start arrive by list; later creates, updates, deletes by watch."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        ns = await harness.namespace(kube)
        await kube.create(CONFIGMAPS, _cm("early", "1"), ns)
        sink = RecordingSink()
        informer = Informer(kube, CONFIGMAPS, sink, RealClock())
        async with anyio.create_task_group() as tg:
            await tg.start(informer.run)
            assert "early" in sink.objects and sink.replaced == 1
            await kube.create(CONFIGMAPS, _cm("late", "1"), ns)
            await kube.merge_patch(CONFIGMAPS, "late", {"data": {"v": "2"}}, ns)
            await kube.delete(CONFIGMAPS, "early", ns)

            async def caught_up() -> bool:
                late = sink.objects.get("late", {})
                return "early" not in sink.objects and late.get("data", {}).get("v") == "2"

            await harness.eventually(caught_up, "the informer to follow three changes")
            mine = [e for e in sink.events if e[1] in ("early", "late")]
            assert mine == [("ADDED", "late"), ("MODIFIED", "late"), ("DELETED", "early")]
            tg.cancel_scope.cancel()
        await kube.delete(kc.NAMESPACES, ns)


@pytest.mark.asyncio
async def test_watch_from_before_an_apiserver_restart_is_gone(control_plane: ControlPlane) -> None:
    """A new apiserver's watch cache starts at the current revision: resuming from an older
    resourceVersion raises errors.Gone (the informer's cue to relist)."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        ns = await harness.namespace(kube)
        _, before = await kube.list(CONFIGMAPS, ns)
        await kube.create(CONFIGMAPS, _cm("bump", "1"), ns)
    await anyio.to_thread.run_sync(control_plane.local.restart_apiserver)
    async with kc.connect(control_plane.kubeconfig) as kube:
        with pytest.raises(errors.Gone):
            async with kube.watch(CONFIGMAPS, before, timeout_seconds=5) as events:
                async for _ in events:
                    pass
        await kube.delete(kc.NAMESPACES, ns)
