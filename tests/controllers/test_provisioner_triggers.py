"""What starts a provisioning pass: a pod turning provisionable or changing its spec, not a
status rewrite of a pod already waiting (the resync covers those every RESYNC_S)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from karpenter.controllers.nominations import NominationPublisher
from karpenter.controllers.provisioner import EARLY_AFTER_S
from tests.controllers.test_provisioner_early import _pod, _provisioner

if TYPE_CHECKING:
    import pytest

    from karpenter.controllers.provisioner import Provisioner


def _record(prov: Provisioner, monkeypatch: pytest.MonkeyPatch, into: list[str]) -> None:
    """Record the keys the provisioner triggers (in place of its batcher's window)."""

    def trigger(key: str, at: float | None = None) -> None:
        into.append(key)

    monkeypatch.setattr(prov.batcher, "trigger", trigger)


def test_status_only_updates_of_a_waiting_pod_trigger_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An Unschedulable pod triggers once; the scheduler rewriting its condition and a
    nomination written to it do not; a changed request does, and so does turning provisionable
    again after a spell bound elsewhere."""
    state, prov, _ = _provisioner(early=False)
    triggered: list[str] = []
    _record(prov, monkeypatch, triggered)
    state.pods.upsert(_pod("p", 1, condition="Unschedulable"))
    assert triggered == ["ns/p"]
    again = _pod("p", 2, condition="Unschedulable")
    again["status"]["conditions"][0]["message"] = "0/140 nodes are available"
    state.pods.upsert(again)
    nominated = _pod("p", 3, condition="Unschedulable")
    nominated["status"]["nominatedNodeName"] = "n1"
    state.pods.upsert(nominated)
    assert triggered == ["ns/p"]
    resized = _pod("p", 4, condition="Unschedulable")
    resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    state.pods.upsert(resized)
    assert triggered == ["ns/p", "ns/p"]
    bound = _pod("p", 5, nodeName="n1")
    state.pods.upsert(bound)
    state.pods.upsert(_pod("p", 6, condition="Unschedulable"))
    assert triggered == ["ns/p", "ns/p", "ns/p"]


def test_the_resync_still_covers_waiting_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every waiting pod is triggered again by the resync (its nomination may have lapsed)."""
    state, prov, _ = _provisioner(early=False)
    state.pods.upsert(_pod("a", 1, condition="Unschedulable"))
    state.pods.upsert(_pod("b", 1, condition="Unschedulable"))
    triggered: list[str] = []
    _record(prov, monkeypatch, triggered)
    prov.trigger_all()
    assert sorted(triggered) == ["ns/a", "ns/b"]


def test_the_verdict_on_a_pod_provisioned_early_is_no_news(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod triggered early (unjudged for a second) is not triggered again when the
    scheduler then marks it Unschedulable: the pass it joined already placed it."""
    state, prov, clock = _provisioner()
    triggered: list[str] = []
    _record(prov, monkeypatch, triggered)
    state.pods.upsert(_pod("p"))
    clock.advance(EARLY_AFTER_S)
    prov._early_due()
    assert triggered == ["ns/p"]
    state.pods.upsert(_pod("p", 2, condition="Unschedulable"))
    assert triggered == ["ns/p"]


def test_a_nodepool_triggers_on_its_spec_not_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """A NodePool created or edited (its generation moves) sends every waiting pod round again;
    its status rewritten as claims launch (same generation) does not."""
    state, prov, _ = _provisioner(early=False)
    state.pods.upsert(_pod("p", 1, condition="Unschedulable"))
    triggered: list[str] = []
    _record(prov, monkeypatch, triggered)
    pool: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "uid": "u", "generation": 1, "resourceVersion": "1"},
        "spec": {"template": {"spec": {"nodeClassRef": {"name": "x"}, "requirements": []}}},
    }
    state.nodepools.upsert(pool)
    assert triggered == ["ns/p"]
    status = copy.deepcopy(pool)
    status["metadata"]["resourceVersion"] = "2"
    status["status"] = {"resources": {"cpu": "16"}}
    state.nodepools.upsert(status)
    assert triggered == ["ns/p"]
    edited = copy.deepcopy(status)
    edited["metadata"].update(resourceVersion="3", generation=2)
    state.nodepools.upsert(edited)
    assert triggered == ["ns/p", "ns/p"]


def test_a_pod_bound_off_its_plan_triggers_the_pods_planned_where_it_went(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A waiting pod bound to another node than the pass placed it on triggers the pending
    pods placed on that node (its room may have been theirs); bound where planned, or bound
    with no plan, it triggers nothing; nor while nominations are held (the scheduler does
    not know the plan then)."""
    state, prov, _ = _provisioner(early=False)
    prov.nominations = NominationPublisher(prov.ctx)
    for name in ("q", "p", "r", "s"):
        state.pods.upsert(_pod(name, 1, condition="Unschedulable"))
    state.nominate("ns/q", "n2", until=1e12)  # planned on n2
    state.nominate("ns/p", "n1", until=1e12)  # planned on n1, still pending
    state.nominate("ns/r", "n1", until=1e12)
    triggered: list[str] = []
    _record(prov, monkeypatch, triggered)
    state.pods.upsert(_pod("r", 2, nodeName="n1"))  # on plan
    state.pods.upsert(_pod("s", 2, nodeName="n1"))  # no plan
    assert triggered == []
    state.pods.upsert(_pod("q", 2, nodeName="n1"))  # off plan, onto p's node
    assert triggered == ["ns/p"]
    state.pods.upsert(_pod("q", 3, nodeName="n1"))  # a later update of the bound pod
    assert triggered == ["ns/p"]
    prov.nominations.held_reason = "per_node_constraints"  # held
    state.pods.upsert(_pod("t", 1, condition="Unschedulable"))  # triggers itself
    state.nominate("ns/t", "n2", until=1e12)
    state.pods.upsert(_pod("t", 2, nodeName="n1"))  # off plan onto p's node, but held
    assert triggered == ["ns/p", "ns/t"]
