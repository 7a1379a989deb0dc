"""Leader election against a real apiserver: one leader at a time, prompt handover, expiry."""

from __future__ import annotations

import dataclasses
import itertools
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import pytest
from kubernetes_asyncio import client

from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from karpenter.kube.leader import LeaderElectionLost, LeaderElector
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-system"
LEASE, RENEW, RETRY = 2.0, 1.5, 0.3  # short durations keep the suite fast


@dataclass
class Candidate:
    """One replica: its elector and the monotonic (start, end) of each term it led."""

    elector: LeaderElector
    terms: list[tuple[float, float]] = field(default_factory=list)
    leading: anyio.Event = field(default_factory=anyio.Event)
    stepped_down: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None

    async def lead(self) -> None:
        start = time.monotonic()
        self.leading.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.terms.append((start, time.monotonic()))
            self.stepped_down.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[anyio.CancelScope]) -> None:
        with anyio.CancelScope() as scope:
            task_status.started(scope)
            try:
                await self.elector.run(self.lead)
            except LeaderElectionLost as err:
                self.error = err


def _elector(kube: kc.KubeClient, name: str, identity: str, **kw: Any) -> LeaderElector:
    return LeaderElector(
        kube,
        NAMESPACE,
        name,
        identity,
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        clock=RealClock(),
        **kw,
    )


async def _holder(api: client.ApiClient, name: str) -> str | None:
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(name, NAMESPACE)
    holder: str | None = lease.spec.holder_identity
    return holder


def _assert_no_overlap(*candidates: Candidate) -> None:
    terms = sorted(t for c in candidates for t in c.terms)
    for (_, prev_end), (start, _) in itertools.pairwise(terms):
        assert start >= prev_end, f"two leaders at once: {terms}"


@pytest.fixture
def lease_name() -> str:
    return f"karpenter-leader-election-{uuid.uuid4().hex[:6]}"


async def _start(tg: anyio.abc.TaskGroup, candidate: Candidate) -> anyio.CancelScope:
    scope: anyio.CancelScope = await tg.start(candidate.run)
    return scope


@pytest.mark.asyncio
async def test_one_leads_other_takes_over_on_release(
    api: client.ApiClient, kube: kc.KubeClient, kube2: kc.KubeClient, lease_name: str
) -> None:
    """The first candidate leads, the second waits, and takes over promptly on clean release."""
    a = Candidate(_elector(kube, lease_name, "a"))
    b = Candidate(_elector(kube2, lease_name, "b"))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            scope_a = await _start(tg, a)
            await a.leading.wait()
            assert await _holder(api, lease_name) == "a"
            scope_b = await _start(tg, b)
            await anyio.sleep(LEASE + 2 * RETRY)  # well past a lease: a keeps renewing
            assert (a.elector.is_leader, b.elector.is_leader) == (True, False)
            assert not b.leading.is_set()

            scope_a.cancel()
            released = time.monotonic()
            await b.leading.wait()
            assert time.monotonic() - released < RETRY + 1.0  # not a whole lease duration
            assert await _holder(api, lease_name) == "b"
            scope_b.cancel()
    assert await _holder(api, lease_name) is None  # b released on the way out too
    assert a.error is None and b.error is None
    _assert_no_overlap(a, b)


@pytest.mark.asyncio
async def test_takeover_after_expiry_when_leader_stops_renewing(
    api: client.ApiClient, kube: kc.KubeClient, kube2: kc.KubeClient, lease_name: str
) -> None:
    """A leader that vanishes without releasing is replaced only after the lease expires."""
    a = Candidate(_elector(kube, lease_name, "a", release_on_cancel=False))
    b = Candidate(_elector(kube2, lease_name, "b"))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            scope_a = await _start(tg, a)
            await a.leading.wait()
            await _start(tg, b)
            await anyio.sleep(RETRY * 2)
            scope_a.cancel()  # a "crashes": no release
            crashed = time.monotonic()
            await anyio.sleep(0.1)
            assert await _holder(api, lease_name) == "a"
            await b.leading.wait()
            waited = time.monotonic() - crashed
            tg.cancel_scope.cancel()
    # a's last renewal was at most one retry period before it vanished
    assert LEASE - RETRY - 0.2 <= waited <= LEASE + RETRY + 1.5, waited
    _assert_no_overlap(a, b)


@pytest.mark.asyncio
async def test_leader_cut_off_from_apiserver_steps_down_before_successor(
    control_plane: ControlPlane, kube2: kc.KubeClient, lease_name: str
) -> None:
    """A leader that cannot renew stops leading after renew_deadline, before anyone takes over."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead_port = sock.getsockname()[1]  # closed on exit: connections are refused
    async with kc.connect(control_plane.kubeconfig) as kube_a:
        a = Candidate(_elector(kube_a, lease_name, "a"))
        b = Candidate(_elector(kube2, lease_name, "b"))
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                await _start(tg, a)
                await a.leading.wait()
                await _start(tg, b)
                await anyio.sleep(RETRY * 2)
                dead = f"https://127.0.0.1:{dead_port}"
                kube_a.creds = dataclasses.replace(kube_a.creds, server=dead)  # partitioned
                cut = time.monotonic()
                await b.leading.wait()
                tg.cancel_scope.cancel()
    assert isinstance(a.error, LeaderElectionLost)
    assert not a.elector.is_leader
    [(_, a_end)] = a.terms
    assert a_end - cut <= RENEW + RETRY + 0.5  # stepped down within the renew deadline
    _assert_no_overlap(a, b)


@pytest.mark.asyncio
async def test_leader_steps_down_when_lease_is_taken(
    api: client.ApiClient, kube: kc.KubeClient, lease_name: str
) -> None:
    """When another holder appears on the Lease the leader cancels lead and raises Lost."""
    a = Candidate(_elector(kube, lease_name, "a"))
    coordination = client.CoordinationV1Api(api)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await _start(tg, a)
            await a.leading.wait()
            lease = await coordination.read_namespaced_lease(lease_name, NAMESPACE)
            lease.spec.holder_identity = "intruder"
            lease.spec.lease_duration_seconds = 60
            await coordination.replace_namespaced_lease(lease_name, NAMESPACE, lease)
            stolen = time.monotonic()
            await a.stepped_down.wait()
    assert a.terms[0][1] - stolen <= RETRY + 1.0
    assert isinstance(a.error, LeaderElectionLost)
    assert await _holder(api, lease_name) == "intruder"  # a lost leader does not release


@pytest.mark.asyncio
async def test_lead_returning_releases_and_counts_transitions(
    api: client.ApiClient, kube: kc.KubeClient, lease_name: str
) -> None:
    """When lead returns, run returns and the Lease is released; a new holder bumps transitions."""
    done: list[bool] = []

    async def lead() -> None:
        done.append(True)

    with anyio.fail_after(30):
        await _elector(kube, lease_name, "a").run(lead)
        await _elector(kube, lease_name, "b").run(lead)
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(lease_name, NAMESPACE)
    assert done == [True, True]
    assert lease.spec.holder_identity is None
    assert lease.spec.lease_transitions == 1
    assert lease.spec.renew_time is not None


@pytest.mark.asyncio
async def test_durations_are_validated(kube: kc.KubeClient) -> None:
    """lease_duration > renew_deadline > retry_period is required, as in client-go."""
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaderElector(
            kube, NAMESPACE, "x", "a", lease_duration=2, renew_deadline=3,
            retry_period=1, clock=RealClock(),
        )  # fmt: skip
