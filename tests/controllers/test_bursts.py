"""The batch window waits for the pods a ReplicaSet of the window has not created yet."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from karpenter.aio.clock import FakeClock
from karpenter.controllers.bursts import MAX_LOOKUPS, STALL_S, Bursts
from karpenter.controllers.provisioner import BURST_HOLD_S, EARLY_AFTER_S, Provisioner
from karpenter.kube.client import KubeClient
from karpenter.state.cluster import ClusterState
from tests.support.context import controller_context

T0 = 1767225700.0


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, owner: str, created: float, *, kind: str = "ReplicaSet") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": name,
            "resourceVersion": "1",
            "creationTimestamp": _stamp(created),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": kind,
                    "name": owner,
                    "uid": owner,
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }


class _ReplicaSets:
    """The apiserver's ReplicaSets as the lookup reads them, counting the reads."""

    def __init__(self, **replicas: int | None) -> None:
        self.replicas = replicas
        self.reads: list[str] = []

    async def __call__(self, namespace: str, name: str) -> int | None:
        self.reads.append(name)
        return self.replicas.get(name)


def _provisioner(rs: _ReplicaSets) -> tuple[ClusterState, Provisioner, FakeClock]:
    state = ClusterState()
    clock = FakeClock(T0)
    ctx = controller_context(cast("KubeClient", None), clock, state=state)
    prov = Provisioner(ctx, batch_idle_s=1.0, batch_max_s=10.0)
    prov.bursts = Bursts(state, clock, rs)
    return state, prov, clock


def _add(state: ClusterState, clock: FakeClock, owner: str, n: int, first: int = 0) -> list[str]:
    keys = []
    for i in range(first, first + n):
        state.pods.upsert(_pod(f"{owner}-{i}", owner, clock.now()))
        keys.append(f"ns/{owner}-{i}")
    return keys


@pytest.mark.asyncio
async def test_a_replicaset_short_of_its_pods_holds_the_window() -> None:
    """4 of the 10 pods a ReplicaSet asked for are here and it created one just now: the
    window is held a moment more (due pods alone would let it close)."""
    rs = _ReplicaSets(web=10)
    state, prov, clock = _provisioner(rs)
    keys = _add(state, clock, "web", 4)
    clock.advance(EARLY_AFTER_S)  # every pod due: only the burst can hold the window
    await prov.bursts.refresh(keys)
    hold = prov.batcher.hold
    assert hold is not None
    assert hold() == clock.now() + BURST_HOLD_S
    seen = clock.now()
    _add(state, clock, "web", 6, first=4)  # the rest arrived: held until they fall due
    assert hold() == seen + EARLY_AFTER_S
    clock.advance(EARLY_AFTER_S)
    assert hold() is None and len(prov.provisionable_pods()) == 10


@pytest.mark.asyncio
async def test_a_replicaset_that_stopped_creating_holds_nothing() -> None:
    """A short ReplicaSet that created no pod for STALL_S (a quota, a webhook refusing its
    pods) holds nothing: the window closes as it would without it."""
    rs = _ReplicaSets(web=10)
    state, prov, clock = _provisioner(rs)
    keys = _add(state, clock, "web", 4)
    await prov.bursts.refresh(keys)
    assert prov.bursts.arriving()
    clock.advance(STALL_S + 1.0)
    assert not prov.bursts.arriving()


@pytest.mark.asyncio
async def test_terminating_pods_do_not_count_and_other_owners_are_not_read() -> None:
    """Pods being deleted are not the ReplicaSet's pods any more; a StatefulSet's pods (created
    one at a time, by design) and a ReplicaSet the apiserver no longer has hold nothing."""
    rs = _ReplicaSets(web=2, gone=None)
    state, prov, clock = _provisioner(rs)
    keys = _add(state, clock, "web", 2)
    await prov.bursts.refresh(keys)
    assert not prov.bursts.arriving()
    leaving = _pod("web-0", "web", clock.now())
    leaving["metadata"].update(resourceVersion="2", deletionTimestamp=_stamp(clock.now() + 30))
    state.pods.upsert(leaving)
    assert prov.bursts.arriving()  # its replacement is on its way
    other = _add(state, clock, "gone", 1)
    state.pods.upsert(_pod("db-0", "db", clock.now(), kind="StatefulSet"))
    fresh = Bursts(state, clock, rs)
    await fresh.refresh([*other, "ns/db-0"])
    assert rs.reads == ["web", "gone"] and not fresh.arriving()


@pytest.mark.asyncio
async def test_each_replicaset_is_read_once_per_window() -> None:
    """The window's ReplicaSets are read once per window, at most MAX_LOOKUPS per refresh (the
    newest), forgotten once none of their pods is in the window, and read afresh after it."""
    rs = _ReplicaSets(**{f"rs{i}": 5 for i in range(MAX_LOOKUPS + 2)})
    state, prov, clock = _provisioner(rs)
    keys = [k for i in range(MAX_LOOKUPS + 2) for k in _add(state, clock, f"rs{i}", 1)]
    await prov.bursts.refresh(keys)
    assert rs.reads == [f"rs{i}" for i in range(2, MAX_LOOKUPS + 2)]
    rs.reads.clear()
    clock.advance(1.0)
    await prov.bursts.refresh(keys)
    assert rs.reads == ["rs0", "rs1"]  # the ones left out last time, not the others again
    rs.reads.clear()
    await prov.bursts.refresh(keys)
    assert rs.reads == []
    assert prov.bursts.arriving()  # 1 of 5 each, created a second ago
    await prov.bursts.refresh([])
    assert not prov.bursts.arriving()
    prov.bursts.clear()
    await prov.bursts.refresh(keys[:1])
    assert rs.reads == ["rs0"]


@pytest.mark.asyncio
async def test_a_burst_that_pauses_longer_than_the_idle_gap_is_one_window() -> None:
    """A ReplicaSet asked for 10 pods: 4 arrive, nothing for 2 s (twice the idle gap), then the
    other 6. The window stays open through the pause, and its pass takes all 10."""
    rs = _ReplicaSets(web=10)
    state, prov, clock = _provisioner(rs)
    start = clock.now()
    _add(state, clock, "web", 4)
    closed: list[tuple[float, int]] = []

    async def waiter() -> None:
        await prov.batcher.wait()
        # the pass takes every pod due by now, triggered or not
        closed.append((clock.now() - start, len(prov.provisionable_pods())))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        tg.start_soon(prov._early_loop)
        while not closed and clock.now() - start < 10.0:
            for _ in range(20):  # let every task run until it sleeps again
                await anyio.lowlevel.checkpoint()
            clock.advance(0.25)
            if clock.now() - start == 2.0 + EARLY_AFTER_S:
                _add(state, clock, "web", 6, first=4)
        tg.cancel_scope.cancel()
    # the last pods were seen at 3.0 s and held the window until they fell due at 4.0 s
    assert closed == [(3.0 + EARLY_AFTER_S, 10)]
