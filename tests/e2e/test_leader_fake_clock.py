"""Leader election timing on the fake clock: the real apiserver, but time moves only when told.

Each step advances a candidate's clock by one retry period and waits until that candidate is
asleep again (its API round trip done), so the step at which something happens is exact.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from collections.abc import Awaitable, Callable
from functools import partial

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from karpenter.aio.clock import FakeClock
from karpenter.kube import client as kc
from karpenter.kube.leader import LeaderElectionLost, LeaderElector
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-system"
LEASE, RENEW, RETRY = 2.0, 1.5, 0.25  # exact in binary floating point: step counts are exact


class Replica:
    """A candidate on its own fake clock, recording whether lead() is running."""

    def __init__(self, kube: kc.KubeClient, lease: str, identity: str, start: float) -> None:
        self.clock = FakeClock(start)
        self.elector = LeaderElector(
            kube, NAMESPACE, lease, identity, lease_duration=LEASE, renew_deadline=RENEW,
            retry_period=RETRY, clock=self.clock,
        )  # fmt: skip
        self.leading = False
        self.error: BaseException | None = None
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()

    async def _lead(self) -> None:
        self.leading = True
        try:
            await anyio.sleep_forever()
        finally:
            self.leading = False

    async def run(self) -> None:
        try:
            with self.scope:
                await self.elector.run(self._lead)
        except LeaderElectionLost as err:
            self.error = err
        finally:
            self.done.set()

    async def settle(self) -> None:
        """Wait until this replica is blocked on its clock again (or has finished)."""

        async def first(wait: Callable[[], Awaitable[None]], scope: anyio.CancelScope) -> None:
            await wait()
            scope.cancel()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first, partial(self.clock.block_until, 1), tg.cancel_scope)
                tg.start_soon(first, self.done.wait, tg.cancel_scope)
        # let a just-woken lead() or a cancellation run to its next checkpoint
        for _ in range(10):
            await anyio.lowlevel.checkpoint()

    async def step(self, count: int = 1) -> None:
        for _ in range(count):
            self.clock.advance(RETRY)
            await self.settle()


async def _together(*replicas: Replica) -> None:
    for r in replicas:
        r.clock.advance(RETRY)
    for r in replicas:
        await r.settle()


@pytest.mark.asyncio
async def test_skewed_clocks_neither_steal_nor_delay(
    kube: kc.KubeClient, kube2: kc.KubeClient
) -> None:
    """A candidate an hour ahead never steals a renewed lease, and takes over after exactly
    one lease duration on its own clock once renewals stop."""
    lease = f"skew-{uuid.uuid4().hex[:6]}"
    a = Replica(kube, lease, "a", start=1_000_000.0)
    b = Replica(kube2, lease, "b", start=1_000_000.0 + 3600)  # renewTimes look an hour old
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        await a.settle()
        assert a.leading
        tg.start_soon(b.run)
        await b.settle()
        for _ in range(3 * int(LEASE / RETRY)):  # three lease durations of steady renewals
            await _together(a, b)
            assert (a.leading, b.leading) == (True, False)

        a.elector._release_on_cancel = False  # a crashes: renewals stop, nothing released
        a.scope.cancel()
        await b.step(int(LEASE / RETRY) - 2)  # 1.5s of silence: still a's lease
        assert not b.leading
        await b.step(3)  # by 2.25s (one lease plus a read that may have seen a's last write)
        assert b.leading
        tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_partitioned_leader_steps_down_exactly_at_renew_deadline(
    control_plane: ControlPlane,
) -> None:
    """A leader whose renewals fail keeps leading until renew_deadline, then raises Lost."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"https://127.0.0.1:{sock.getsockname()[1]}"
    lease = f"partition-{uuid.uuid4().hex[:6]}"
    async with kc.connect(control_plane.kubeconfig) as kube:
        a = Replica(kube, lease, "a", start=5_000.0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.run)
            await a.settle()
            await a.step(2)  # two good renewals; the last one started at +0.5s
            kube.creds = dataclasses.replace(kube.creds, server=dead)
            await a.step(int(RENEW / RETRY) - 1)  # failures up to +1.75s: 1.25s since renewal
            assert a.leading and a.elector.is_leader
            await a.step()  # +2.0s: 1.5s since the last renewal started
            assert not a.leading and not a.elector.is_leader
    assert isinstance(a.error, LeaderElectionLost)
    assert "1.5s" in str(a.error)
