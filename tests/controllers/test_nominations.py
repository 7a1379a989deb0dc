"""Which pods a registration nominates to its Node (the writes run on a real apiserver in
``tests/e2e/test_nominations.py``)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from karpenter.aio.clock import FakeClock
from karpenter.api import decode
from karpenter.controllers.nominations import (
    NominationPublisher,
    interchangeable,
    per_node_constraints,
    planned_pods,
)
from karpenter.kube.client import KubeClient
from karpenter.state.cluster import ClusterState
from tests.support.context import controller_context


def _pod(name: str, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    rv = str(status.pop("rv", 1))
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": name, "resourceVersion": rv}
    if status.pop("bound", False):
        spec["nodeName"] = "n1"
    if status.pop("deleting", False):
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def test_only_pending_pods_placed_there_and_not_named_yet_are_nominated() -> None:
    """A claim's registration nominates the pods placed on the claim (or on its Node) that are
    pending, alive, and neither carry that Node yet nor were just written with it."""
    state = ClusterState()
    pods = {
        "mine": _pod("mine"),
        "on-node-name": _pod("on-node-name"),
        "bound": _pod("bound", bound=True),
        "deleting": _pod("deleting", deleting=True),
        "already": _pod("already", nominatedNodeName="n1"),
        "elsewhere-before": _pod("elsewhere-before", nominatedNodeName="n9"),
        "sent": _pod("sent"),
        "other-claim": _pod("other-claim"),
    }
    for name, obj in pods.items():
        state.pods.upsert(obj)
        target = {"on-node-name": "n1", "other-claim": "c2"}.get(name, "c1")
        state.nominate(f"ns/{name}", target, until=100.0)
    state.nominate("ns/gone", "c1", until=100.0)  # the pod was deleted since
    found = planned_pods(state, ("c1", "n1"), "n1", {"ns/sent": "n1"})
    assert [p.name for p in found] == ["elsewhere-before", "mine", "on-node-name"]


def test_the_index_follows_renominations_and_expiry() -> None:
    """A pod nominated elsewhere leaves its old target's list; an expired nomination leaves
    every list (the index a registration reads instead of scanning every nomination)."""
    state = ClusterState()
    for name in ("a", "b"):
        state.pods.upsert(_pod(name))
    state.nominate("ns/a", "c1", until=10.0)
    state.nominate("ns/b", "c1", until=20.0)
    assert state.nominated_to(("c1",)) == ["ns/a", "ns/b"]
    state.nominate("ns/a", "c2", until=30.0)
    assert state.nominated_to(("c1",)) == ["ns/b"]
    assert state.nominated_to(("c1", "c2")) == ["ns/a", "ns/b"]
    state.with_nominations([], now=25.0)  # a pass: b's nomination has expired
    assert state.nominated_to(("c1", "c2")) == ["ns/a"]
    assert "ns/b" not in state.nominations


def test_per_node_constraints_are_hostname_spreads_and_affinities() -> None:
    """A DoNotSchedule spread or a required pod (anti-)affinity over the hostname holds
    nominations back; a zone spread, a ScheduleAnyway spread or a preferred term does not."""
    host, zone = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
    selector = {"matchLabels": {"app": "a"}}

    def pod(**spec: Any) -> Any:
        obj = _pod("p")
        obj["spec"].update(spec)
        return decode.pod(obj)

    def spread(key: str, when: str = "DoNotSchedule") -> dict[str, Any]:
        return {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": selector,
        }

    term = {"topologyKey": host, "labelSelector": selector}
    preferred = {"weight": 1, "podAffinityTerm": term}
    assert per_node_constraints(pod(topologySpreadConstraints=[spread(host)]))
    assert per_node_constraints(
        pod(
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        )
    )
    assert per_node_constraints(
        pod(affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    )
    assert not per_node_constraints(pod())
    assert not per_node_constraints(pod(topologySpreadConstraints=[spread(zone)]))
    assert not per_node_constraints(pod(topologySpreadConstraints=[spread(host, "ScheduleAnyway")]))
    assert not per_node_constraints(
        pod(
            affinity={
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preferred]}
            }
        )
    )


def test_interchangeable_pods_hold_nominations_and_any_difference_publishes() -> None:
    """A pass whose pending pods are all alike (one namespace, labels, requests, node selection,
    tolerations, priority; no spread, affinity, host port or volume) holds nominations; one pod
    differing in any of those, a single pod, or a pod tied to others publishes them."""

    def pod(name: str, cpu: str = "1", **spec: Any) -> Any:
        obj = _pod(name)
        obj["metadata"]["labels"] = {"app": "web"}
        obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
        obj["spec"].update(spec)
        return decode.pod(obj)

    ctx = controller_context(cast("KubeClient", None), FakeClock(0.0), state=ClusterState())
    publisher = NominationPublisher(ctx)  # no write is made here
    alike = [pod(f"p{i}") for i in range(5)]
    assert interchangeable(alike)
    publisher.hold_for(alike)
    assert publisher.held and publisher.held_reason == "interchangeable"
    other_ns = decode.pod({**_pod("q"), "metadata": {"name": "q", "namespace": "other"}})
    differing = [
        pod("x", cpu="2"),
        pod("x", nodeSelector={"zone": "a"}),
        pod("x", tolerations=[{"key": "k", "operator": "Exists"}]),
        pod("x", priority=10),
        pod("x", hostNetwork=True, containers=[{"name": "c", "ports": [{"hostPort": 80}]}]),
        pod("x", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]),
        other_ns,
    ]
    for odd in differing:
        assert not interchangeable([*alike, odd]), odd
        publisher.hold_for([*alike, odd])
        assert not publisher.held and publisher.held_reason == ""
    relabelled = decode.pod({**_pod("r"), "metadata": {"name": "r", "namespace": "ns"}})
    assert not interchangeable([*alike, relabelled])
    assert not interchangeable(alike[:1])
    publisher.hold_for(())
    assert not publisher.held
    spread = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    assert not interchangeable([pod(f"s{i}", topologySpreadConstraints=[spread]) for i in range(3)])


def _repairing() -> tuple[ClusterState, NominationPublisher]:
    """A publisher whose registration wrote pod ``ns/p``'s nomination to Node n1 (planned on
    claim c1, which registered as n1)."""
    state = ClusterState()
    state.nodeclaims.upsert(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "c1", "resourceVersion": "1"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "x"}},
            "status": {"nodeName": "n1", "providerID": "sim://c1"},
        }
    )
    state.nodes.upsert(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "resourceVersion": "1"}}
    )
    ctx = controller_context(cast("KubeClient", None), FakeClock(0.0), state=state)
    publisher = NominationPublisher(ctx)
    state.nominate("ns/p", "c1", until=100.0)
    publisher.sent["ns/p"] = "n1"
    return state, publisher


def test_a_nomination_cleared_after_the_watch_showed_it_is_queued_for_repair() -> None:
    """The watch trailing the write (the pod still without a nomination) queues nothing; once
    it has shown the nomination, the scheduler clearing it on the pending pod queues a repair."""
    state, publisher = _repairing()
    state.pods.upsert(_pod("p", rv=2))  # an event from before the write landed
    assert len(publisher.queue) == 0
    state.pods.upsert(_pod("p", nominatedNodeName="n1", rv=3))
    assert len(publisher.queue) == 0
    state.pods.upsert(_pod("p", rv=4))  # the scheduler's preemption step cleared it
    assert len(publisher.queue) == 1


def test_a_nomination_moved_elsewhere_or_a_bound_pod_is_not_repaired() -> None:
    """The scheduler's own nomination (preemption elsewhere) is left alone, and a pod that
    bound is forgotten: a later event without a nomination queues nothing."""
    state, publisher = _repairing()
    state.pods.upsert(_pod("p", nominatedNodeName="n1", rv=5))
    state.pods.upsert(_pod("p", nominatedNodeName="n7", rv=6))
    assert len(publisher.queue) == 0
    state.pods.upsert(_pod("p", rv=7))  # cleared after the scheduler's own: its call
    assert len(publisher.queue) == 0
    state.pods.upsert(_pod("p", nominatedNodeName="n1", rv=8))
    state.pods.upsert(_pod("p", bound=True, rv=9))
    state.pods.upsert(_pod("p", rv=10))
    assert len(publisher.queue) == 0


@pytest.mark.asyncio
async def test_repair_writes_nothing_when_the_plan_moved_or_expired() -> None:
    """A repair rereads the plan: a pod the provisioner has since placed elsewhere, or whose
    plan expired, or while nominations are held, is not written (the client here would fail
    any write)."""
    state, publisher = _repairing()
    state.pods.upsert(_pod("p", rv=11))
    assert publisher.planned_node("ns/p") == "n1"
    state.nominate("ns/p", "c2", until=100.0)
    assert publisher.planned_node("ns/p") == ""
    await publisher.repair("ns/p")
    state.nominate("ns/p", "c1", until=100.0)
    publisher.held_reason = "interchangeable"
    await publisher.repair("ns/p")
    publisher.held_reason = ""
    state.nominate("ns/p", "c1", until=-1.0)
    assert publisher.planned_node("ns/p") == ""
    await publisher.repair("ns/p")
    assert publisher.sent == {"ns/p": "n1"}


class _WatchFirst:
    """A client whose write is seen by the watch before its answer is read (an informer
    event handled while the writing task still awaits the response)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    async def merge_patch(self, res: Any, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        self.state.pods.upsert(_pod(name, nominatedNodeName="n1", rv=50))
        return {}


@pytest.mark.asyncio
async def test_a_nomination_the_watch_shows_before_the_answer_is_still_repaired() -> None:
    """The pod's event with the written nomination arrives before the write returns: the
    publisher already counts it as written, so the scheduler clearing it later queues a
    repair."""
    state, publisher = _repairing()
    publisher.kube = cast("KubeClient", _WatchFirst(state))
    publisher.sent.clear()
    state.pods.upsert(_pod("p", rv=12))
    pod = state.pods.get("ns/p")
    assert pod is not None
    assert await publisher.write([pod], "n1") == 1
    state.pods.upsert(_pod("p", rv=51))  # cleared by the scheduler
    assert len(publisher.queue) == 1


def test_per_node_constraints_hold_only_a_pass_where_every_pending_pod_has_them() -> None:
    """Pods spread over the hostname, alone: held (nominations would cost the scheduler N²
    per attempt, and one such pod taking another's slot strands nobody). With an
    unconstrained pod pending beside them: published, so it cannot take their single slots
    (the do-not-disrupt burst: 557 nodes for a 500-node plan while held)."""
    spread = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "a"}},
    }

    def pod(name: str, **spec: Any) -> Any:
        obj = _pod(name)
        obj["metadata"]["labels"] = {"app": "a"}
        obj["spec"].update(spec)
        return decode.pod(obj)

    ctx = controller_context(cast("KubeClient", None), FakeClock(0.0), state=ClusterState())
    publisher = NominationPublisher(ctx)
    spread_pods = [pod(f"s{i}", topologySpreadConstraints=[spread]) for i in range(3)]
    publisher.hold_for(spread_pods)
    assert publisher.held and publisher.held_reason == "per_node_constraints"
    publisher.hold_for([*spread_pods, pod("free")])
    assert not publisher.held and publisher.held_reason == ""
    publisher.hold_for([])
    assert not publisher.held
