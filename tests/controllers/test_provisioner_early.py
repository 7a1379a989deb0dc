"""Early provisioning: pods the kube-scheduler has not judged within a second join the pass."""

from __future__ import annotations

from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from karpenter.aio.clock import FakeClock
from karpenter.api import decode
from karpenter.controllers.provisioner import (
    EARLY_AFTER_S,
    EARLY_UNTIL_S,
    HOLD_AFTER_S,
    Provisioner,
)
from karpenter.kube.client import KubeClient
from karpenter.state.cluster import ClusterState
from tests.support.context import controller_context


def _pod(name: str, rv: int = 1, *, condition: str = "", **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if condition:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": condition}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": str(rv)},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec},
        "status": status,
    }


def _provisioner(*, early: bool = True) -> tuple[ClusterState, Provisioner, FakeClock]:
    state = ClusterState()
    clock = FakeClock(1767225700.0)
    # passes (the only users of the client) run on the real apiserver in e2e
    ctx = controller_context(cast("KubeClient", None), clock, state=state)
    return state, Provisioner(ctx, batch_idle_s=1.0, batch_max_s=10.0, early=early), clock


def _keys(prov: Provisioner) -> list[str]:
    return [p.key for p in prov.provisionable_pods()]


@pytest.mark.parametrize(
    ("condition", "spec", "expected"),
    [
        pytest.param("", {}, True, id="no-verdict-yet"),
        pytest.param("", {"schedulerName": "default-scheduler"}, True, id="named-default"),
        pytest.param("Unschedulable", {}, False, id="judged-unschedulable"),
        pytest.param("SchedulingGated", {}, False, id="gated-condition"),
        pytest.param("", {"schedulingGates": [{"name": "g"}]}, False, id="gated-spec"),
        pytest.param("", {"schedulerName": "volcano"}, False, id="another-scheduler"),
    ],
)
def test_awaiting_scheduler_decodes(condition: str, spec: dict[str, Any], expected: bool) -> None:
    """Only a pod with no PodScheduled condition, no gates and the default scheduler awaits it."""
    assert decode.pod(_pod("p", condition=condition, **spec)).awaiting_scheduler is expected


def test_unjudged_pod_joins_after_a_second_and_leaves_after_a_minute() -> None:
    """An unjudged pod is provisionable from EARLY_AFTER_S to EARLY_UNTIL_S after first seen."""
    state, prov, clock = _provisioner()
    state.pods.upsert(_pod("p"))
    assert _keys(prov) == []
    prov._early_due()
    assert prov.batcher.pending == 0
    clock.advance(EARLY_AFTER_S)
    assert _keys(prov) == ["ns/p"]
    prov._early_due()
    assert prov.batcher.pending == 1  # the window opens when the pod falls due
    clock.advance(EARLY_UNTIL_S)
    assert _keys(prov) == []  # a scheduler that never judges it: wait for its verdict again


def test_verdict_or_binding_ends_the_early_window() -> None:
    """The scheduler's verdict hands the pod to upstream's rule; a binding drops it."""
    state, prov, clock = _provisioner()
    state.pods.upsert(_pod("a"))
    state.pods.upsert(_pod("b"))
    clock.advance(EARLY_AFTER_S)
    assert _keys(prov) == ["ns/a", "ns/b"]
    state.pods.upsert(_pod("a", 2, condition="Unschedulable"))
    state.pods.upsert(_pod("b", 2, nodeName="n1"))
    assert prov.awaiting == {}
    clock.advance(EARLY_UNTIL_S)
    assert _keys(prov) == ["ns/a"]  # Unschedulable: provisionable for as long as it stays so


def test_first_seen_not_creation_times_the_wait() -> None:
    """The wait counts from when this controller first saw the pod (a restart starts over)."""
    state, prov, clock = _provisioner()
    obj = _pod("p")
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"  # long before the clock
    state.pods.upsert(obj)
    assert _keys(prov) == []
    clock.advance(EARLY_AFTER_S)
    assert _keys(prov) == ["ns/p"]


@pytest.mark.parametrize(
    "change",
    ["daemonset", "mirror", "preempting", "deleting", "opt-out"],
)
def test_what_upstream_never_provisions_is_never_early(change: str) -> None:
    """DaemonSet, mirror, preempting, deleting and opted-out pods stay out however long."""
    state, prov, clock = _provisioner()
    obj = _pod("p")
    if change == "daemonset":
        obj["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "d", "apiVersion": "v"}]
    elif change == "mirror":
        obj["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    elif change == "preempting":  # the scheduler evicts a pod on n2 for it
        obj["status"]["nominatedNodeName"] = "n2"
        state.nodes.upsert({"kind": "Node", "metadata": {"name": "n2", "resourceVersion": "1"}})
        victim = _pod("victim", nodeName="n2")
        victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        state.pods.upsert(victim)
    elif change == "deleting":
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    else:
        expr = {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}
        terms = {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}
        obj["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}
        }
    state.pods.upsert(obj)
    clock.advance(EARLY_AFTER_S)
    prov._early_due()
    assert _keys(prov) == [] and prov.batcher.pending == 0


def test_gate_off_is_upstreams_rule() -> None:
    """With EarlyProvisioning off, only the scheduler's Unschedulable verdict counts."""
    state, prov, clock = _provisioner(early=False)
    state.pods.upsert(_pod("p"))
    state.pods.upsert(_pod("q", condition="Unschedulable"))
    clock.advance(EARLY_AFTER_S)
    prov._early_due()
    assert _keys(prov) == ["ns/q"] and prov.awaiting == {}


def test_a_pod_awaiting_but_not_due_holds_the_window_until_it_falls_due() -> None:
    """The window waits for a pod seen awaiting for HOLD_AFTER_S until it falls due; a pod
    seen just now, one already due, or one bound meanwhile holds nothing."""
    state, prov, clock = _provisioner()
    hold = prov.batcher.hold
    assert hold is not None
    state.pods.upsert(_pod("a"))
    assert hold() is None and prov.not_due() == 1  # too young: a healthy scheduler binds it
    clock.advance(HOLD_AFTER_S)
    seen_b = clock.now()
    state.pods.upsert(_pod("b"))
    assert hold() == seen_b - HOLD_AFTER_S + EARLY_AFTER_S  # a's due time (b is too young)
    clock.advance(HOLD_AFTER_S)
    assert hold() == seen_b + EARLY_AFTER_S  # the newest one old enough: b
    state.pods.upsert(_pod("b", 2, nodeName="n1"))  # bound: it holds nothing any more
    assert hold() == seen_b - HOLD_AFTER_S + EARLY_AFTER_S
    clock.advance(EARLY_AFTER_S)
    assert hold() is None and prov.not_due() == 0  # a is due: the pass takes it


def test_gate_off_holds_nothing() -> None:
    """Without early provisioning nothing is awaited, so no window is held."""
    _, prov, _ = _provisioner(early=False)
    assert prov.batcher.hold is None


def test_a_pass_takes_due_pods_without_opening_another_window() -> None:
    """Pods that fell due before the tick saw them are taken by the pass starting (it solves
    them): no trigger now and none later, so no second pass with nothing new in it."""
    state, prov, clock = _provisioner()
    state.pods.upsert(_pod("a"))
    clock.advance(EARLY_AFTER_S)
    prov._early_due(trigger=False)
    assert prov.batcher.pending == 0 and _keys(prov) == ["ns/a"]
    prov._early_due()
    assert prov.batcher.pending == 0


@pytest.mark.asyncio
async def test_a_burst_window_closes_one_idle_gap_after_its_last_pod_showed_up() -> None:
    """The idle gap counts from when each pod showed it was part of a burst (awaiting for
    HOLD_AFTER_S), not from the tick that found it due a second after it was seen: the window
    of a burst whose last pod was seen at t closes at t + HOLD_AFTER_S + idle (2 s before)."""
    state, prov, clock = _provisioner()
    start = clock.now()
    state.pods.upsert(_pod("a"))
    clock.advance(0.5)
    state.pods.upsert(_pod("b"))  # the burst's last pod
    clock.advance(EARLY_AFTER_S - 0.5)
    prov._early_due()  # a falls due; b holds the window until it does
    assert prov.batcher.pending == 1
    closed: list[float] = []

    async def waiter() -> None:
        await prov.batcher.wait()
        closed.append(clock.now() - start)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        while not closed:
            await anyio.lowlevel.checkpoint()
            if clock.sleepers:
                clock.advance(0.25)
                prov._early_due()
    assert closed == [0.5 + HOLD_AFTER_S + 1.0]
