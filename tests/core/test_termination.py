"""Drain decisions: tiers, what is skipped, terminationGracePeriod timing, volumes, back-off."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.core import termination as term
from karpenter.core.model import labels as lbl
from karpenter.core.model.pod import Owner, Pod
from karpenter.core.scheduling.taints import Toleration
from tests.support import builders as b

NOW = 1_000_000.0
DS = (Owner("DaemonSet", "agent", "apps/v1", controller=True),)
RS = (Owner("ReplicaSet", "web-123", "apps/v1", controller=True),)


def _pod(name: str, **kw: Any) -> Pod:
    kw.setdefault("node_name", "node-a")
    kw.setdefault("phase", "Running")
    kw.setdefault("owners", RS)
    kw.setdefault("termination_grace_seconds", 30)
    return b.pod(name, **kw)


def _names(pods: tuple[Pod, ...]) -> list[str]:
    return [p.name for p in pods]


def test_tiers_drain_one_at_a_time_in_upstream_order() -> None:
    """Only the first tier with pods left is evicted: workloads, DaemonSets, critical, critical DS
    pods."""
    pods = [
        _pod("crit-ds", owners=DS, priority_class_name="system-node-critical"),
        _pod("crit", priority_class_name="system-cluster-critical"),
        _pod("ds", owners=DS),
        _pod("web-1"),
        _pod("web-0"),
    ]
    order = []
    while pods:
        plan = term.plan_drain(pods, NOW, None)
        order.append((plan.tier, _names(plan.evict)))
        gone = {p.name for p in plan.evict}
        pods = [p for p in pods if p.name not in gone]
    assert order == [
        ("non-critical", ["web-0", "web-1"]),
        ("non-critical-daemonset", ["ds"]),
        ("critical", ["crit"]),
        ("critical-daemonset", ["crit-ds"]),
    ]
    assert term.plan_drain([], NOW, None).drained


def test_next_tier_waits_until_the_previous_one_is_gone() -> None:
    """A terminating workload pod still holds back the DaemonSet tier; it is not evicted again."""
    pods = [_pod("web", deleting=True, deletion_time=NOW + 20), _pod("ds", owners=DS)]
    plan = term.plan_drain(pods, NOW, None)
    assert plan.evict == ()
    assert plan.tier == "non-critical"
    assert _names(plan.remaining) == ["ds", "web"]
    assert not plan.drained


@pytest.mark.parametrize(
    ("pod", "drainable"),
    [
        pytest.param(_pod("plain"), True, id="running-pod"),
        pytest.param(_pod("done", phase="Succeeded"), False, id="terminal"),
        pytest.param(_pod("failed", phase="Failed"), False, id="failed"),
        pytest.param(
            _pod("mirror", owners=(Owner("Node", "node-a", "v1"),)), False, id="mirror-pod"
        ),
        pytest.param(
            _pod("tol", tolerations=(Toleration(lbl.TAINT_DISRUPTED, "Exists"),)),
            False,
            id="tolerates-disrupted",
        ),
        pytest.param(
            _pod("all", tolerations=(Toleration(operator="Exists"),)), False, id="tolerates-all"
        ),
        pytest.param(
            _pod("other", tolerations=(Toleration("other", "Exists"),)), True, id="other-toleration"
        ),
        pytest.param(
            _pod("going", deleting=True, deletion_time=NOW - 59), True, id="terminating-recently"
        ),
        pytest.param(
            _pod("stuck", deleting=True, deletion_time=NOW - 61), False, id="stuck-terminating"
        ),
    ],
)
def test_which_pods_are_drained(pod: Pod, drainable: bool) -> None:
    """Terminal, mirror, disrupted-tolerating and stuck pods never hold a drain."""
    assert term.drainable(pod, NOW) is drainable
    plan = term.plan_drain([pod], NOW, None)
    assert plan.drained is not drainable


def test_do_not_disrupt_pods_are_held_without_a_deadline() -> None:
    """An active do-not-disrupt pod is neither evicted nor deleted, and the drain waits for it."""
    keep = _pod("keep", annotations={lbl.DO_NOT_DISRUPT: "true"})
    expired = _pod("expired", annotations={lbl.DO_NOT_DISRUPT: "1m"}, start_time=NOW - 120)
    plan = term.plan_drain([keep, expired], NOW, None)
    assert _names(plan.held) == ["keep"]
    assert _names(plan.evict) == ["expired"]
    assert plan.delete == ()
    assert not term.plan_drain([keep], NOW + 10_000, None).drained


@pytest.mark.parametrize(
    ("pod", "now", "grace"),
    [
        pytest.param(_pod("early"), NOW + 69, None, id="before-deadline-minus-grace"),
        pytest.param(_pod("due"), NOW + 70, 30, id="at-deadline-minus-grace"),
        pytest.param(_pod("late"), NOW + 90, 10, id="grace-clamped-to-time-left"),
        pytest.param(_pod("past"), NOW + 500, 1, id="past-deadline-at-least-1s"),
        pytest.param(
            _pod("zero", termination_grace_seconds=0), NOW + 100, 0, id="pod-asked-for-zero"
        ),
        pytest.param(
            _pod("zero-early", termination_grace_seconds=0), NOW + 99, None, id="zero-grace-waits"
        ),
        pytest.param(
            _pod("default", termination_grace_seconds=None), NOW + 70, 30, id="default-grace"
        ),
        pytest.param(
            _pod("long", deleting=True, deletion_time=NOW + 200), NOW + 80, 20, id="outlives-tgp"
        ),
        pytest.param(
            _pod("short", deleting=True, deletion_time=NOW + 90), NOW + 80, None, id="ends-in-time"
        ),
    ],
)
def test_force_delete_timing(pod: Pod, now: float, grace: int | None) -> None:
    """With TGP 100 s from NOW, pods are deleted at deadline − grace, clamped to the time left."""
    deadline = term.termination_deadline(NOW, 100)
    assert term.force_delete_grace(pod, now, deadline) == grace
    assert term.force_delete_grace(pod, now, None) is None


def test_force_deletion_bypasses_do_not_disrupt_and_tiers() -> None:
    """Past the deadline every tier is deleted at once, do-not-disrupt pods included."""
    pods = [
        _pod("keep", annotations={lbl.DO_NOT_DISRUPT: "true"}),
        _pod("crit-ds", owners=DS, priority_class_name="system-node-critical"),
    ]
    deadline = term.termination_deadline(NOW, 60)
    plan = term.plan_drain(pods, NOW + 61, deadline)
    assert [(d.pod.name, d.grace_s) for d in plan.delete] == [("crit-ds", 1), ("keep", 1)]
    assert plan.evict == ()
    assert plan.held == ()


def test_deadline_needs_deletion_and_grace() -> None:
    """No TGP or no deletion timestamp means no deadline."""
    assert term.termination_deadline(None, 60) is None
    assert term.termination_deadline(NOW, None) is None
    assert term.termination_deadline(NOW, 0) == NOW


def test_drained_waits_the_minimum_drain_time() -> None:
    """Drained is declared no sooner than 5 s after draining started."""
    assert term.drained_after(NOW, NOW + 1) == pytest.approx(4.0)
    assert term.drained_after(NOW, NOW + 6) == 0.0
    assert term.drained_after(None, NOW) == term.MIN_DRAIN_S


def test_eviction_retry_backs_off_to_ten_seconds() -> None:
    """Refused evictions are retried 0.1 s, 0.2 s, ... up to 10 s apart."""
    assert [term.eviction_retry_s(n) for n in (1, 2, 3)] == pytest.approx([0.1, 0.2, 0.4])
    assert term.eviction_retry_s(20) == 10.0


def test_volumes_of_undrained_pods_do_not_block() -> None:
    """Only attachments of volumes no remaining pod uses are waited for."""
    attachments = [("va-b", "pv-b"), ("va-a", "pv-a"), ("va-kept", "pv-kept")]
    assert term.volumes_blocking(attachments, {"pv-kept"}) == ("va-a", "va-b")
    assert term.volumes_blocking([("va-kept", "pv-kept")], {"pv-kept"}) == ()
