"""The controller survives an apiserver restart, and two replicas never both act."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest

from karpenter.kube import client as kc
from karpenter.operator import Operator
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


async def _bound(kube: kc.KubeClient, ns: str, count: int) -> bool:
    pods, _ = await kube.list(kc.PODS, ns)
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


@pytest.mark.asyncio
async def test_watch_survives_apiserver_restart_without_duplicate_launches(
    control_plane: ControlPlane,
) -> None:
    """After an apiserver restart the mirror resyncs, nothing is launched twice, and new pods
    are still provisioned."""
    async with harness.running(control_plane.kubeconfig) as op:
        async with kc.connect(control_plane.kubeconfig) as kube:
            pool = harness.unique("pool")
            ns = await harness.namespace(kube)
            await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
            for i in range(4):
                await kube.create(kc.PODS, harness.pod(f"before-{i}", pool), ns)
            await harness.eventually(lambda: _bound(kube, ns, 4), "pods bound before restart")
            before = {c["metadata"]["name"] for c in await harness.claims_of(kube, pool)}
            created_before = len(op.provisioner.created_at)

        await anyio.to_thread.run_sync(control_plane.local.restart_apiserver)

        async with kc.connect(control_plane.kubeconfig) as kube:
            # the mirror keeps answering after the restart: a pod needing a bigger node arrives
            await kube.create(kc.PODS, harness.pod("after", pool, cpu="3"), ns)
            await harness.eventually(lambda: _bound(kube, ns, 5), "the new pod bound after restart")
            after = {c["metadata"]["name"] for c in await harness.claims_of(kube, pool)}
            assert before < after
            assert len(after) == len(before) + 1  # exactly one launch for the new pod
            assert len(op.provisioner.created_at) == created_before + 1
            assert all(i.synced.is_set() for i in op.informers)
            await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_two_replicas_never_both_act(control_plane: ControlPlane) -> None:
    """With leader election on, one replica leads; the other takes over only when it stops."""
    lease = harness.unique("lease")
    replicas: dict[str, Operator] = {}
    scopes: dict[str, anyio.CancelScope] = {}
    overlaps: list[float] = []

    async def replica(name: str, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.CancelScope() as scope:
            scopes[name] = scope
            async with harness.running(
                control_plane.kubeconfig,
                identity=name,
                DISABLE_LEADER_ELECTION=False,
                LEADER_ELECTION_NAME=lease,
                LEADER_ELECTION_NAMESPACE="default",
            ) as op:
                replicas[name] = op
                task_status.started()
                await anyio.sleep_forever()

    async def watch_overlap() -> None:
        while True:
            leaders = [
                n for n, op in replicas.items() if op.leading and not scopes[n].cancel_called
            ]
            if len(leaders) > 1:
                overlaps.append(anyio.current_time())
            await anyio.sleep(0.02)

    async def one_leader() -> str:
        leaders = [n for n, op in replicas.items() if op.leading and not scopes[n].cancel_called]
        return leaders[0] if len(leaders) == 1 else ""

    async with anyio.create_task_group() as tg, kc.connect(control_plane.kubeconfig) as kube:
        await tg.start(replica, "replica-a")
        await tg.start(replica, "replica-b")
        tg.start_soon(watch_overlap)
        first = await harness.eventually(one_leader, "one leader")
        other = next(n for n in replicas if n != first)

        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        for i in range(3):
            await kube.create(kc.PODS, harness.pod(f"a-{i}", pool), ns)
        await harness.eventually(lambda: _bound(kube, ns, 3), "pods bound by the first leader")
        assert replicas[first].provisioner.created_at
        assert not replicas[other].provisioner.created_at
        assert not replicas[other].provisioner.passes

        scopes[first].cancel()  # the leader shuts down and releases the Lease
        second = await harness.eventually(one_leader, "the standby to take over")
        assert second == other
        await kube.create(kc.PODS, harness.pod("b-0", pool, cpu="3"), ns)
        await harness.eventually(lambda: _bound(kube, ns, 4), "a pod bound by the new leader")
        assert replicas[other].provisioner.created_at
        assert overlaps == []
        await harness.cleanup(kube, pool, ns)
        tg.cancel_scope.cancel()
