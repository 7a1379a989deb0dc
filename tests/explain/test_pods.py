"""``explain pod`` as a table: bound, existing node, in-flight claim, new claim, or reasons."""

from __future__ import annotations

from dataclasses import replace

import pytest

from karpenter.core import buffers
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Options
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.pod import Pod
from karpenter.explain import pods, render
from tests.support import builders as b

M1, M2, M4, M8, M16 = b.catalog()
POOL = b.nodepool("default")


def _pending(name: str, cpu: str) -> Pod:
    return replace(b.pod(name, cpu=cpu), unschedulable_condition=True)


def test_outcomes() -> None:
    """Each pod's verdict names where the provisioner's pass puts it and why."""
    room = b.managed_node("roomy", M4)
    inflight = NodeClaim(
        "claim-1",
        "default",
        {
            lbl.NODEPOOL: "default",
            lbl.INSTANCE_TYPE: M2.name,
            lbl.ZONE: "zone-a",
            lbl.CAPACITY_TYPE: "on-demand",
        },
        provider_id="test://claim-1",
        allocatable=M2.allocatable,
        capacity=dict(M2.capacity),
        launched=True,
    )
    fits = _pending("fits", "2")
    later = _pending("later", "1")
    big = _pending("big", "12")
    huge = _pending("huge", "200")
    bound = b.bound("roomy", "bound")
    cluster = b.cluster(
        (POOL,), nodes=(room,), nodeclaims=(inflight,), pods=(fits, later, big, huge, bound)
    )
    pending = [fits, later, big, huge]
    got = {
        key: pods.explain_pod(cluster, f"default/{key}", pending, Options())
        for key in ("fits", "later", "big", "huge", "bound")
    }
    assert (got["fits"].outcome, got["fits"].target) == (pods.EXISTING_NODE, "roomy")
    assert (got["later"].outcome, got["later"].target) == (pods.IN_FLIGHT, "claim-1")
    assert (got["big"].outcome, got["big"].target) == (pods.NEW_NODECLAIM, "default")
    assert got["big"].claim is not None and got["big"].claim.launch.instance_type == "m-16x"
    assert got["huge"].outcome == pods.UNSCHEDULABLE
    assert got["huge"].reason == "no instance type has 200 cpu; largest allocatable is 15.9"
    assert (got["bound"].outcome, got["bound"].provisionable) == (pods.BOUND, False)
    doc = render.pod_json(got["big"])
    assert doc["nodeClaim"]["nodePool"] == "default"
    assert "launch:        m-16x spot zone-a" in render.pod_table(doc)


def test_not_yet_unschedulable_pod_is_still_answered() -> None:
    """A pod the kube-scheduler has not marked is not provisionable, and the verdict says what
    would happen once it is."""
    waiting = b.pod("waiting", cpu="1")
    cluster = b.cluster((POOL,), pods=(waiting,))
    verdict = pods.explain_pod(cluster, "default/waiting", [], Options())
    assert not verdict.provisionable
    assert verdict.outcome == pods.NEW_NODECLAIM
    assert "kube-scheduler has not marked" in verdict.note


def test_unknown_pod() -> None:
    """An unknown pod raises UnknownPod."""
    with pytest.raises(pods.UnknownPod):
        pods.explain_pod(b.cluster((POOL,)), "default/nope", [], Options())


def test_buffer_headroom_takes_the_room_first() -> None:
    """A CapacityBuffer's virtual pods are solved with the pending pods, as the provisioner's
    pass solves them: when they fill the only node with room, the pod needs a new NodeClaim."""
    room = b.managed_node("roomy", M4)
    fits = _pending("fits", "2")
    headroom = buffers.virtual_pods(buffers.Buffer("default", "warm", b.pod("chunk", cpu="3"), 1))
    without = b.cluster((POOL,), nodes=(room,), pods=(fits,))
    with_buffer = replace(without, virtual_pods=headroom)
    alone = pods.explain_pod(without, "default/fits", [fits], Options())
    crowded = pods.explain_pod(with_buffer, "default/fits", [fits], Options())
    assert (alone.outcome, alone.target) == (pods.EXISTING_NODE, "roomy")
    assert (crowded.outcome, crowded.target) == (pods.NEW_NODECLAIM, "default")
