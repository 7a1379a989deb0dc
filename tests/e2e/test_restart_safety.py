"""SIGKILL the controller in the middle of things, start it again: nothing lost, nothing leaked.

``karpenter run`` runs as its own process (as in a Deployment's pod) with the simulated cloud,
whose instances are records in the cluster. Each test kills it with SIGKILL at one point —
while NodeClaims are being created and launched, while instances boot, mid-drain, and between
a consolidation's taint and its delete — starts a new process and checks that it finishes
the work: every pod Running on a kwok node, every NodeClaim with exactly one instance record
and one Node, no record or Node without a claim, no disrupted taint left on a node that stays.
The cloud's own garbage collection is then run (on a clock past its grace periods) against
that final state and must terminate nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from karpenter.aio.clock import FakeClock
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec
from karpenter.providers.simulated import cloud as simulated
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

_REPO = Path(__file__).resolve().parents[2]
CATALOG = 8
WAIT_S = 120.0


class Controller:
    """``karpenter run`` as a child process that tests kill with SIGKILL and start again."""

    def __init__(self, kubeconfig: Path, log: Path, boot_delay_s: float) -> None:
        self.args = [
            sys.executable, "-m", "karpenter", "run", "--kubeconfig", str(kubeconfig),
            "--catalog", f"fake:{CATALOG}", "--boot-delay", str(boot_delay_s),
        ]  # fmt: skip
        self.env = {
            **os.environ,
            "PYTHONPATH": str(_REPO),
            "METRICS_PORT": "0",
            "HEALTH_PROBE_PORT": "0",
            "BATCH_IDLE_DURATION": "200ms",
            "BATCH_MAX_DURATION": "2s",
            "DISABLE_LEADER_ELECTION": "true",
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    def kill(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-2000:]
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@contextmanager
def controller(kubeconfig: Path, tmp_path: Path, boot_delay_s: float = 1.0) -> Iterator[Controller]:
    proc = Controller(kubeconfig, tmp_path / "controller.log", boot_delay_s)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _deployment(name: str, pool: str, replicas: int, cpu: str, grace: int) -> dict[str, Any]:
    template = harness.pod("x", pool, cpu=cpu)
    template["metadata"] = {"labels": {"app": name}}
    template["spec"]["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": template},
    }  # fmt: skip


async def _running(kube: kc.KubeClient, ns: str, count: int) -> bool:
    pods, _ = await kube.list(kc.PODS, ns)
    live = [p for p in pods if not codec.meta(p).get("deletionTimestamp")]
    return len(live) == count and all(p["status"].get("phase") == "Running" for p in live)


async def _consistent(kube: kc.KubeClient, pool: str) -> bool:
    """Claims, instance records and Nodes of the pool match one to one, none is going away,
    and no node that stays carries the disrupted taint."""
    claims = await harness.claims_of(kube, pool)
    records, _ = await kube.list(
        kc.CONFIGMAPS, "karpenter-simulated", label_selector=f"{lbl.NODEPOOL}={pool}"
    )
    nodes, _ = await kube.list(kc.NODES, label_selector=f"{lbl.NODEPOOL}={pool}")
    names = {codec.name(c) for c in claims}
    if any(codec.meta(o).get("deletionTimestamp") for o in (*claims, *nodes)):
        return False
    if any(lbl.TAINT_DISRUPTED in {t["key"] for t in codec.taints_of(n)} for n in nodes):
        return False
    launched = all(c.get("status", {}).get("nodeName") for c in claims)
    return launched and names == {codec.name(r) for r in records} == {codec.name(n) for n in nodes}


async def _settled(kube: kc.KubeClient, pool: str, ns: str, pods: int) -> None:
    async def done() -> bool:
        return await _running(kube, ns, pods) and await _consistent(kube, pool)

    what = f"{pods} pods Running and claims/records/nodes consistent"
    await harness.eventually(done, what, WAIT_S)


async def _gc_terminates_nothing(kube: kc.KubeClient, pool: str) -> None:
    """The simulated cloud's garbage collection, on a clock past every grace period, leaves
    the settled fleet alone (it would terminate leaked instances and delete orphan Nodes)."""
    clock = FakeClock(0.0)
    cloud = simulated.SimulatedCloud(kube, fake_instance_types(CATALOG), clock)
    clock.advance(10**10)  # far beyond LEAK_GRACE_S and ORPHAN_NODE_GRACE_S
    for _ in range(2):  # the orphan grace counts from the first sweep that sees a Node
        await cloud.reconcile()
        clock.advance(10**4)
    assert await _consistent(kube, pool)


async def _setup(kube: kc.KubeClient, consolidate: bool = False) -> tuple[str, str]:
    pool = harness.unique("restart")
    ns = await harness.namespace(kube)
    body = harness.nodepool(pool)
    if consolidate:
        body["spec"]["disruption"] = {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "0s",
        }
    await kube.create(kc.NODEPOOLS, body)
    return pool, ns


@pytest.mark.asyncio
async def test_killed_while_launching_and_booting(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Killed as soon as the first NodeClaim exists (launches in flight, records being
    written), then again while instances boot: the restarted process launches each claim
    once, boots every instance, and every pod runs."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        pool, ns = await _setup(kube)
        with controller(control_plane.kubeconfig, tmp_path, boot_delay_s=6.0) as proc:
            await kube.create(kc.DEPLOYMENTS, _deployment("web", pool, 30, "700m", 0), ns)

            async def first_claim() -> bool:
                return bool(await harness.claims_of(kube, pool))

            await harness.eventually(first_claim, "the first NodeClaim", WAIT_S)
            proc.kill()
            proc.start()

            async def all_launched() -> bool:
                claims = await harness.claims_of(kube, pool)
                return bool(claims) and all(c.get("status", {}).get("providerID") for c in claims)

            await harness.eventually(all_launched, "every claim launched", WAIT_S)
            nodes, _ = await kube.list(kc.NODES, label_selector=f"{lbl.NODEPOOL}={pool}")
            assert len(nodes) < len(await harness.claims_of(kube, pool))  # still booting
            proc.kill()
            proc.start()
            await _settled(kube, pool, ns, 30)
            await _gc_terminates_nothing(kube, pool)
            await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_killed_mid_drain(control_plane: ControlPlane, tmp_path: Path) -> None:
    """Killed while a deleted NodeClaim's node drains pods with a 4 s grace period: the new
    process finishes the drain, terminates the instance and releases the finalizers."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        pool, ns = await _setup(kube)
        with controller(control_plane.kubeconfig, tmp_path) as proc:
            await kube.create(kc.DEPLOYMENTS, _deployment("web", pool, 6, "1", 4), ns)
            await _settled(kube, pool, ns, 6)
            victim = codec.name((await harness.claims_of(kube, pool))[0])
            await kube.delete(kc.NODECLAIMS, victim)

            async def draining() -> bool:
                pods, _ = await kube.list(kc.PODS, ns)
                return any(codec.meta(p).get("deletionTimestamp") for p in pods)

            await harness.eventually(draining, "a pod terminating in the drain", WAIT_S)
            proc.kill()
            proc.start()

            async def gone() -> bool:
                return victim not in {codec.name(c) for c in await harness.claims_of(kube, pool)}

            await harness.eventually(gone, "the drained claim finalized", WAIT_S)
            await _settled(kube, pool, ns, 6)
            await _gc_terminates_nothing(kube, pool)
            await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_killed_between_taint_and_delete(control_plane: ControlPlane, tmp_path: Path) -> None:
    """Killed after consolidation tainted a node but before it deleted it: the new process
    does not leave the node tainted; the fleet consolidates and no pod is lost."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        pool, ns = await _setup(kube, consolidate=True)
        with controller(control_plane.kubeconfig, tmp_path) as proc:
            await kube.create(kc.DEPLOYMENTS, _deployment("web", pool, 12, "900m", 1), ns)
            await _settled(kube, pool, ns, 12)
            await kube.merge_patch(kc.DEPLOYMENTS, "web", {"spec": {"replicas": 3}}, ns)

            async def tainted() -> bool:
                nodes, _ = await kube.list(kc.NODES, label_selector=f"{lbl.NODEPOOL}={pool}")
                return any(
                    lbl.TAINT_DISRUPTED in {t["key"] for t in codec.taints_of(n)} for n in nodes
                )

            await harness.eventually(tainted, "a node tainted for disruption", WAIT_S)
            proc.kill()
            proc.start()
            await _settled(kube, pool, ns, 3)
            await _gc_terminates_nothing(kube, pool)
            await harness.cleanup(kube, pool, ns)
