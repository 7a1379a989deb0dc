"""Registration's Node write on a real apiserver: it locks the lists it replaces, not the Node.

A kubelet's status heartbeat bumps the Node's resourceVersion every few seconds; registration
must not lose a round trip to that (it used to: a resourceVersion lock made it a Conflict).
Another writer's change to the taints it replaces must still fail it, never be overwritten.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from karpenter.aio.clock import RealClock
from karpenter.api import decode
from karpenter.controllers.lifecycle import Lifecycle
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from tests.e2e.conftest import ControlPlane
from tests.support.context import controller_context

pytestmark = pytest.mark.e2e

AGENT_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}


async def _node_and_claim(kube: kc.KubeClient) -> tuple[dict[str, Any], dict[str, Any]]:
    name = f"lock-{uuid.uuid4().hex[:6]}"
    claim = await kube.create(
        kc.NODECLAIMS,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.test", "kind": "SimNodeClass", "name": "x"},
                "requirements": [],
            },
        },
    )
    node = await kube.create(
        kc.NODES,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {
                "providerID": f"simulated://{name}",
                "taints": [{"key": lbl.TAINT_UNREGISTERED, "effect": "NoExecute"}, AGENT_TAINT],
            },
        },
    )
    return node, claim


async def _remove(kube: kc.KubeClient, name: str) -> None:
    """Delete the claim and the Node (no controller runs here to finalize it)."""
    await kube.delete(kc.NODECLAIMS, name)
    try:  # the garbage collector may delete the Node (its owner went) at any point here
        node = await kube.get(kc.NODES, name)
        kept = [
            f for f in codec.meta(node).get("finalizers") or [] if f != lbl.FINALIZER_TERMINATION
        ]
        await kube.merge_patch(kc.NODES, name, {"metadata": {"finalizers": kept or None}})
        await kube.delete(kc.NODES, name)
    except errors.NotFound:
        pass


async def _heartbeat(kube: kc.KubeClient, name: str) -> None:
    """What a kubelet does every few seconds: a status write (a new resourceVersion)."""
    cond = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "beat"}
    await kube.merge_patch(kc.NODES, name, {"status": {"conditions": [cond]}}, subresource="status")


@pytest.mark.asyncio
async def test_a_heartbeat_between_read_and_write_does_not_fail_registration(
    control_plane: ControlPlane,
) -> None:
    """The Node as read before a status heartbeat is still registered in one write."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        lifecycle = Lifecycle(controller_context(kube, RealClock()))
        node, claim = await _node_and_claim(kube)
        await _heartbeat(kube, codec.name(node))  # the copy in hand is now stale
        patched = await lifecycle._sync_node(node, claim, decode.node_claim(claim))
        keys = [t["key"] for t in codec.taints_of(patched)]
        assert keys == [AGENT_TAINT["key"]]
        labels = codec.meta(patched)["labels"]
        assert labels[lbl.REGISTERED] == "true" and labels["team"] == "a"
        assert lbl.FINALIZER_TERMINATION in codec.meta(patched)["finalizers"]
        assert [o["uid"] for o in codec.meta(patched)["ownerReferences"]] == [codec.uid(claim)]
        assert codec.condition_true(patched, "Ready")  # the heartbeat's write is kept
        await _remove(kube, codec.name(claim))


@pytest.mark.asyncio
async def test_a_taint_changed_meanwhile_fails_the_write_and_is_kept(
    control_plane: ControlPlane,
) -> None:
    """An agent removing its taint between read and write makes the write a Conflict; the
    agent's change stands (registration reads again and retries)."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        lifecycle = Lifecycle(controller_context(kube, RealClock()))
        node, claim = await _node_and_claim(kube)
        name = codec.name(node)
        unregistered = [{"key": lbl.TAINT_UNREGISTERED, "effect": "NoExecute"}]
        await kube.merge_patch(kc.NODES, name, {"spec": {"taints": unregistered}})
        with pytest.raises(errors.Conflict):
            await lifecycle._sync_node(node, claim, decode.node_claim(claim))
        fresh = await kube.get(kc.NODES, name)
        assert codec.taints_of(fresh) == unregistered
        assert lbl.REGISTERED not in (codec.meta(fresh).get("labels") or {})
        registered = await lifecycle._sync_node(fresh, claim, decode.node_claim(claim))
        assert codec.taints_of(registered) == []
        await _remove(kube, name)


@pytest.mark.asyncio
async def test_a_ready_node_is_initialized_in_the_registration_write(
    control_plane: ControlPlane,
) -> None:
    """A Node already Ready with no startup taint left gets the initialized label in the same
    write that registers it (no second Node update); one not Ready yet does not."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        lifecycle = Lifecycle(controller_context(kube, RealClock()))
        node, claim = await _node_and_claim(kube)
        name = codec.name(node)
        first = await lifecycle._sync_node(node, claim, decode.node_claim(claim))
        assert lbl.INITIALIZED not in codec.meta(first)["labels"]  # no Ready condition yet
        await _heartbeat(kube, name)
        ready = await kube.get(kc.NODES, name)
        second = await lifecycle._sync_node(ready, claim, decode.node_claim(claim))
        assert codec.meta(second)["labels"][lbl.INITIALIZED] == "true"
        await _remove(kube, name)
