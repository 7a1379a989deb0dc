"""Crash anywhere (matrix item 1): SIGKILL ``karpenter run --cloud-provider aws`` mid-flight.

Each trial gives a fresh NodePool a 3-replica Deployment (one node's worth), picks a phase
(launch, registration, disruption, termination), kills the controller with SIGKILL at a
seeded random moment of that phase and restarts it at once. Then it waits for the system to
settle and counts: NodeClaims created beyond what the trial needs (duplicates, from the
apiserver's audit log of the controller's own user), pods never bound, and, after tearing the
trial down, Nodes and NodeClaims stuck deleting. After the last trial it waits out the instance
GC window and counts live EC2 instances no NodeClaim owns (leaks). The bounded test and the
benchmark (``bench/faults_crash.py``) run this same code with different trial counts.
"""

from __future__ import annotations

import random
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from karpenter.kube import errors
from karpenter.providers.aws.runtime.nodeclasses import EC2NODECLASSES
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.faults import audit
from tests.faults import aws as fa
from tests.faults.process import LEADING_LINE, Controller, base_env

PHASES = ("launch", "registration", "disruption", "termination")
# claims a trial rightly makes: termination deletes the node, whose pods need a new one
EXPECTED_CLAIMS = {"launch": 1, "registration": 1, "disruption": 1, "termination": 2}
# the kill is drawn uniformly over this many seconds after the phase begins
KILL_WINDOW_S = {"launch": 3.0, "registration": 1.5, "disruption": 25.0, "termination": 8.0}
SETTLE_S = 120.0
GC_WINDOW_S = 30.0 + 120.0 + 30.0  # grace + slow period + margin (controllers/aws_gc.py)
REPLICAS = 3


@dataclass
class Trial:
    """One trial's phase, kill time and what it counted."""

    phase: str
    kill_after_s: float
    claims_created: int = 0
    duplicates: int = 0
    unplaced: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    restart_s: float = 0.0  # SIGKILL → the new incarnation leading


@dataclass
class Report:
    """A campaign: its trials and the end-of-run leak count."""

    seed: int
    trials: list[Trial] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    leak_wait_s: float = 0.0
    instances_launched: int = 0
    controller_starts: int = 0
    crashes: int = 0  # incarnations that died on their own (never SIGKILLed)

    def totals(self) -> dict[str, int]:
        return {
            "trials": len(self.trials),
            "leaks": len(self.leaks),
            "duplicates": sum(t.duplicates for t in self.trials),
            "stuck": sum(len(t.stuck) for t in self.trials),
            "unplaced": sum(len(t.unplaced) for t in self.trials),
            "crashes": self.crashes,
        }


def deployment(pool: str, replicas: int = REPLICAS, cpu: str = "400m") -> dict[str, Any]:
    """Pods of ``pool`` (harness isolation), ``replicas`` of them, that come back when evicted."""
    spec = harness.pod("app", pool, cpu=cpu)["spec"]
    labels = {"app": pool}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


@dataclass
class Campaign:
    """Everything a trial needs: the plane, the account, the controller, a kube client."""

    plane: ControlPlane
    account: fa.Account
    controller: Controller
    kube: kc.KubeClient
    user: str
    nodeclass: str
    rng: random.Random
    say: Callable[[str], None]
    deleted: set[str] = field(default_factory=set)  # claims the experiment deleted itself

    async def bound(self, ns: str, count: int) -> bool:
        pods, _ = await self.kube.list(kc.PODS, ns)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return len(live) == count and all(p["spec"].get("nodeName") for p in live)

    async def claims(self, pool: str) -> list[dict[str, Any]]:
        return await harness.claims_of(self.kube, pool)

    async def launched(self, pool: str) -> list[dict[str, Any]]:
        return [c for c in await self.claims(pool) if (c.get("status") or {}).get("providerID")]

    async def kill_and_restart(self, delay: float) -> float:
        await anyio.sleep(delay)
        killed = time.monotonic()
        code = self.controller.signal(signal.SIGKILL)
        if code != -signal.SIGKILL:
            raise AssertionError(f"controller had exited ({code}) before the kill")
        self.controller.start()
        leading = await anyio.to_thread.run_sync(self.controller.wait_for, LEADING_LINE)
        return leading - killed


async def _phase(c: Campaign, phase: str, ns: str, pool: str, delay: float) -> float:
    """Drive the trial into ``phase``, kill and restart inside it; returns the restart time."""
    if phase in ("disruption", "termination", "registration"):
        what = "launched" if phase == "registration" else "bound"
        if phase == "registration":
            await harness.eventually(lambda: c.launched(pool), "a launched claim", SETTLE_S)
        else:
            await harness.eventually(lambda: c.bound(ns, REPLICAS), f"pods {what}", SETTLE_S)
    if phase == "disruption":  # the node empties; consolidation removes it
        await c.kube.merge_patch(kc.DEPLOYMENTS, "app", {"spec": {"replicas": 0}}, ns)
    elif phase == "termination":  # a NodeClaim deleted by hand (or an interruption)
        for claim in await c.claims(pool):
            c.deleted.add(claim["metadata"]["name"])
            await c.kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])
    return await c.kill_and_restart(delay)


async def _settle(c: Campaign, t: Trial, ns: str, pool: str) -> None:
    """Wait for the trial's end state; what never arrives is counted, not raised."""
    if t.phase == "disruption":
        probe = lambda: _none(c.claims(pool))  # noqa: E731 - a one-line probe
        what = "the empty node consolidated"
    else:
        probe = lambda: _replaced(c, ns, pool)  # noqa: E731
        what = "every pod bound (on a new node when the old one was deleted)"
    try:
        await harness.eventually(probe, what, SETTLE_S)
    except AssertionError:
        pods, _ = await c.kube.list(kc.PODS, ns)
        t.unplaced = [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
        if t.phase == "disruption":
            t.stuck += [x["metadata"]["name"] for x in await c.claims(pool)]


async def _replaced(c: Campaign, ns: str, pool: str) -> bool:
    names = {x["metadata"]["name"] for x in await c.claims(pool)}
    return not names & c.deleted and await c.bound(ns, REPLICAS)


async def _none(items: Any) -> bool:
    return not await items


async def _teardown(c: Campaign, t: Trial, ns: str, pool: str) -> None:
    """Delete the trial's namespace and pool; claims still present after SETTLE_S are stuck."""
    await c.kube.delete(kc.NAMESPACES, ns)
    try:
        await c.kube.delete(kc.NODEPOOLS, pool)
    except errors.NotFound:
        pass
    for claim in await c.claims(pool):
        try:
            await c.kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])
        except errors.NotFound:
            pass
    try:
        await harness.eventually(lambda: _none(c.claims(pool)), "claims finalized", SETTLE_S)
    except AssertionError:
        t.stuck += [x["metadata"]["name"] for x in await c.claims(pool)]
    nodes, _ = await c.kube.list(kc.NODES)
    t.stuck += [
        n["metadata"]["name"]
        for n in nodes
        if n["metadata"].get("deletionTimestamp")
        and (n["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool
    ]


async def trial(c: Campaign, index: int, phase: str) -> Trial:
    """One trial (see the module docstring)."""
    t = Trial(phase, round(c.rng.uniform(0.0, KILL_WINDOW_S[phase]), 3))
    ns = await harness.namespace(c.kube)
    pool = f"crash-{index}-{uuid.uuid4().hex[:4]}"
    since = RealClock().now() - 1.0
    await c.kube.create(kc.NODEPOOLS, fa.nodepool(pool, c.nodeclass))
    await c.kube.create(kc.DEPLOYMENTS, deployment(pool), ns)
    t.restart_s = await _phase(c, phase, ns, pool, t.kill_after_s)
    await _settle(c, t, ns, pool)
    entries = audit.read(c.plane.local.audit_log, since=since, user=c.user)
    created = [e for e in audit.nodeclaim_creations(entries) if audit.pool_of(e) == pool]
    t.claims_created = len(created)
    t.duplicates = max(0, len(created) - EXPECTED_CLAIMS[phase])
    await _teardown(c, t, ns, pool)
    c.say(
        f"trial {index:3d} {phase:12s} kill@{t.kill_after_s:5.2f}s restart {t.restart_s:4.1f}s "
        f"claims {t.claims_created} dup {t.duplicates} unplaced {len(t.unplaced)} "
        f"stuck {len(t.stuck)}"
    )
    return t


async def _nodeclass_ready(kube: kc.KubeClient, name: str) -> bool:
    obj = await kube.get(EC2NODECLASSES, name)
    conditions = {x["type"]: x for x in (obj.get("status") or {}).get("conditions", [])}
    return bool(conditions.get("Ready", {}).get("status") == "True")


async def _final_leaks(c: Campaign, report: Report, ec2: Any) -> None:
    """Wait out the GC window; whatever is still unowned then is a leak."""
    start = time.monotonic()

    async def clean() -> bool:
        found = await fa.census(c.kube, ec2, c.account.cluster, [])
        report.leaks = found.leaks
        return not found.leaks

    try:
        await harness.eventually(clean, "unowned instances collected", GC_WINDOW_S)
    except AssertionError:
        pass
    report.leak_wait_s = time.monotonic() - start
    out = await ec2.describe_instances(
        Filters=[{"Name": "tag:eks:eks-cluster-name", "Values": [c.account.cluster]}]
    )
    report.instances_launched = sum(len(r["Instances"]) for r in out["Reservations"])


async def campaign(
    plane: ControlPlane,
    moto_url: str,
    trials: int,
    seed: int,
    work: Path,
    say: Callable[[str], None] = print,
) -> Report:
    """Run ``trials`` trials (phases in turn, kill times seeded) and count (module docstring)."""
    cluster = f"crash-{uuid.uuid4().hex[:6]}"
    account = await fa.seed(moto_url, cluster)
    user = f"karpenter-{cluster}"
    kubeconfig = plane.local.kubeconfig_for(user)
    controller = Controller(
        ["--cloud-provider", "aws", "--kubeconfig", str(kubeconfig)],
        base_env(**fa.controller_env(account)),
        work / f"{cluster}.log",
    )
    report = Report(seed)
    controller.start()
    try:
        await anyio.to_thread.run_sync(controller.wait_for, LEADING_LINE)
        async with (
            kc.connect(plane.kubeconfig) as kube,
            fa.session().client("ec2", endpoint_url=moto_url) as ec2,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(fa.NodeAgent(kube, account).run)
            nodeclass = f"crash-{cluster}"
            await kube.create(EC2NODECLASSES, fa.nodeclass(account, nodeclass))
            await harness.eventually(
                lambda: _nodeclass_ready(kube, nodeclass), "EC2NodeClass Ready", SETTLE_S
            )
            c = Campaign(
                plane, account, controller, kube, user, nodeclass, random.Random(seed), say
            )
            for i in range(trials):
                report.trials.append(await trial(c, i, PHASES[i % len(PHASES)]))
            await _final_leaks(c, report, ec2)
            await kube.delete(EC2NODECLASSES, nodeclass)
            tg.cancel_scope.cancel()
    finally:
        controller.stop()
        report.controller_starts = controller.starts
        report.crashes = sum(1 for code in controller.exits if code not in (-9, 0))
    return report
