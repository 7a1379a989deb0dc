"""Failover (matrix item 4): two ``karpenter run`` replicas on one Lease; the leader is killed.

Each replica authenticates as its own user (``karpenter-a`` / ``karpenter-b``), so the
apiserver's audit log says who wrote what and when: that is the observer. A round: replica A
leads and provisions for some pods, B stands by; A gets SIGKILL or SIGTERM; the time until
the Lease names a new holder is the failover time; B provisions for new pods. Overlap is
any write (other than to the Lease) by the old leader received after the new leader's first
write, or by a replica while the other held the Lease.
"""

from __future__ import annotations

import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.faults import audit
from tests.faults.process import LEADING_LINE, READY_LINE, Controller, base_env

SETTLE_S = 90.0


@dataclass
class Round:
    """One kill: how, how long until the other led, and the writes seen."""

    how: str
    failover_s: float = 0.0
    writes_before: int = 0  # the first leader's writes
    writes_after: int = 0  # the second leader's writes
    overlaps: list[str] = field(default_factory=list)
    exit_code: int = 0
    killed_at: float = 0.0  # wall clock (the audit log's)


async def _holder(kube: kc.KubeClient, lease: str) -> str:
    try:
        obj = await kube.get(kc.LEASES, lease, "default")
    except Exception:
        return ""
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


async def _bound(kube: kc.KubeClient, ns: str, count: int) -> bool:
    pods, _ = await kube.list(kc.PODS, ns)
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


def _replica(plane: ControlPlane, name: str, lease: str, work: Path) -> Controller:
    kubeconfig = plane.local.kubeconfig_for(name)
    env = base_env(
        DISABLE_LEADER_ELECTION="false",
        LEADER_ELECTION_NAME=lease,
        LEADER_ELECTION_NAMESPACE="default",
    )
    args = ["--kubeconfig", str(kubeconfig), "--catalog", "fake:8", "--boot-delay", "0"]
    return Controller(args, env, work / f"{name}.log")


def _overlaps(entries: list[audit.Entry], old: str, new: str, killed: float) -> list[str]:
    """Writes by ``new`` before ``old`` was killed, and by ``old`` received after ``new`` first
    wrote (the Lease itself excluded: campaigning is how they agree)."""
    writes = [e for e in entries if e.verb in audit.WRITE_VERBS and e.resource != "leases"]
    early = [
        f"{new}: {e.verb} {e.resource}/{e.name}" for e in writes if e.user == new and e.at < killed
    ]
    first_new = min((e.at for e in writes if e.user == new), default=None)
    if first_new is None:
        return early
    late = [
        f"{old}: {e.verb} {e.resource}/{e.name}"
        for e in writes
        if e.user == old and e.at > first_new
    ]
    return early + late


async def one_round(plane: ControlPlane, how: signal.Signals, work: Path) -> Round:
    """Start A then B, load A, kill A with ``how``, load B; measure and observe."""
    lease = f"failover-{uuid.uuid4().hex[:6]}"
    suffix = uuid.uuid4().hex[:4]
    a = _replica(plane, f"karpenter-a-{suffix}", lease, work)
    b = _replica(plane, f"karpenter-b-{suffix}", lease, work)
    result = Round(how.name)
    since = RealClock().now() - 1.0
    a.start()
    try:
        await anyio.to_thread.run_sync(a.wait_for, LEADING_LINE)
        b.start()
        await anyio.to_thread.run_sync(b.wait_for, READY_LINE)
        async with kc.connect(plane.kubeconfig) as kube:
            holder = await _holder(kube, lease)
            pool = f"fo-{suffix}"
            ns = await harness.namespace(kube)
            await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
            for i in range(2):
                await kube.create(kc.PODS, harness.pod(f"a-{i}", pool), ns)
            await harness.eventually(lambda: _bound(kube, ns, 2), "A's pods bound", SETTLE_S)
            killed, result.killed_at = time.monotonic(), RealClock().now()
            result.exit_code = await anyio.to_thread.run_sync(a.signal, how)

            async def moved() -> bool:
                now = await _holder(kube, lease)
                return bool(now) and now != holder

            await harness.eventually(moved, "a new Lease holder", SETTLE_S)
            result.failover_s = time.monotonic() - killed
            await kube.create(kc.PODS, harness.pod("b-0", pool, cpu="3"), ns)
            await harness.eventually(lambda: _bound(kube, ns, 3), "B's pod bound", SETTLE_S)
            await harness.cleanup(kube, pool, ns)
    finally:
        a.stop()
        b.stop()
    entries = audit.read(plane.local.audit_log, since=since)
    writes = [e for e in entries if e.verb in audit.WRITE_VERBS and e.resource != "leases"]
    result.writes_before = sum(1 for e in writes if e.user == a_user(a))
    result.writes_after = sum(1 for e in writes if e.user == a_user(b))
    result.overlaps = _overlaps(entries, a_user(a), a_user(b), result.killed_at)
    return result


def a_user(c: Controller) -> str:
    """The user a replica authenticates as (its log file is named after it)."""
    return c.log.stem
