"""Crash anywhere on the simulated cloud + kwok (matrix item 1, second half): SIGKILL
``karpenter run --cloud-provider simulated`` mid-flight, restart it, count what was lost.

The simulated cloud keeps its instances as ConfigMaps in ``karpenter-simulated`` (one per
instance, named after its NodeClaim) and boots their Nodes from the controller process; kwok is
the kubelet of those Nodes (Ready, pods Running, deleted pods gone after their grace period)
and its node agent removes the NodePool's startup taint a moment after the Node turns Ready. So
a SIGKILL can land between any two of: NodeClaim created, record stored, providerID written,
Node created, Node Ready, startup taint removed, registered, initialized; consolidation's
taint and delete; the drain's evictions, the instance's termination, the finalizer's removal.

Each trial gives a fresh NodePool a 3-replica Deployment (1.5 CPU: one node of the fake
catalog), picks a phase in turn (launch, registration, disruption, termination), kills the
controller with SIGKILL at a seeded uniform moment of that phase's window and restarts it at
once. Counted per trial: NodeClaims created beyond what the trial needs (duplicates, from the
audit log of the controller's own user), pods not Running when the trial should have settled
(never Running), and after tearing the trial down, NodeClaims and Nodes still present with a
finalizer (stuck). After the last trial and the cloud's GC window: instance records no NodeClaim
owns (leaks) and simulated Nodes with neither a record nor a NodeClaim (orphan nodes).
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
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.providers.simulated import cloud as simcloud
from karpenter.providers.simulated import instances
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.faults import audit, crash
from tests.faults.process import LEADING_LINE, Controller, base_env

PHASES = crash.PHASES
EXPECTED_CLAIMS = crash.EXPECTED_CLAIMS
BOOT_DELAY_S = 2.0  # launch → Node, so registration has a window of its own
POD_GRACE_S = 3  # the drain of the termination phase takes this long at least
KILL_WINDOW_S = {"launch": 3.0, "registration": 4.0, "disruption": 20.0, "termination": 8.0}
SETTLE_S = 120.0
# a record no claim owns is terminated after LEAK_GRACE_S, seen at a RECONCILE_S sweep
GC_WINDOW_S = simcloud.LEAK_GRACE_S + simcloud.RECONCILE_S + 20.0
STARTUP_TAINT = "faults.karpenter.sh/agent-not-ready"
REPLICAS, CPU = 3, "500m"


@dataclass
class Trial:
    """One trial's phase, kill time and what it counted."""

    phase: str
    kill_after_s: float
    claims_created: int = 0
    instances_launched: int = 0  # instance records created for this trial's claims
    duplicates: int = 0
    never_running: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    restart_s: float = 0.0  # SIGKILL → the new incarnation leading
    evidence: list[str] = field(default_factory=list)  # state of a trial that did not settle


@dataclass
class Report:
    """A campaign: its trials and the end-of-run census."""

    seed: int
    trials: list[Trial] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    orphan_nodes: list[str] = field(default_factory=list)
    leak_wait_s: float = 0.0
    controller_starts: int = 0
    kills: int = 0  # SIGKILLs that found the controller running
    crashes: int = 0  # incarnations that died on their own (never SIGKILLed)

    def totals(self) -> dict[str, int]:
        return {
            "trials": len(self.trials),
            "kills": self.kills,
            "leaks": len(self.leaks),
            "orphan_nodes": len(self.orphan_nodes),
            "duplicates": sum(t.duplicates for t in self.trials),
            "stuck": sum(len(t.stuck) for t in self.trials),
            "never_running": sum(len(t.never_running) for t in self.trials),
            "crashes": self.crashes,
        }


def nodepool(name: str) -> dict[str, Any]:
    """The trial's pool: isolated (harness taint), a startup taint kwok's agent removes, and
    consolidation of empty nodes at once (the disruption phase)."""
    body = harness.nodepool(name)
    body["spec"]["template"]["spec"]["startupTaints"] = [
        {"key": STARTUP_TAINT, "effect": "NoSchedule"}
    ]
    body["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
    return body


def deployment(pool: str) -> dict[str, Any]:
    body = crash.deployment(pool, REPLICAS, CPU)
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = POD_GRACE_S
    return body


@dataclass
class Campaign:
    """What a trial needs: the plane, the controller, an admin client, the dice."""

    plane: ControlPlane
    controller: Controller
    kube: kc.KubeClient
    user: str
    prefix: str  # every pool of the campaign starts with it
    rng: random.Random
    say: Callable[[str], None]
    deleted: set[str] = field(default_factory=set)  # claims the experiment deleted itself

    async def claims(self, pool: str) -> list[dict[str, Any]]:
        return await harness.claims_of(self.kube, pool)

    async def running(self, ns: str, count: int) -> bool:
        pods, _ = await self.kube.list(kc.PODS, ns)
        live = [p for p in pods if not codec.meta(p).get("deletionTimestamp")]
        return len(live) == count and all(_running(p) for p in live)

    async def launched(self, pool: str) -> bool:
        return any((c.get("status") or {}).get("providerID") for c in await self.claims(pool))

    async def kill_and_restart(self, delay: float) -> float:
        await anyio.sleep(delay)
        killed = time.monotonic()
        code = self.controller.signal(signal.SIGKILL)
        if code != -signal.SIGKILL:
            raise AssertionError(f"controller had exited ({code}) before the kill")
        self.controller.start()
        leading = await anyio.to_thread.run_sync(self.controller.wait_for, LEADING_LINE)
        return leading - killed


def _running(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and (pod.get("status") or {}).get("phase") == "Running"


async def _phase(c: Campaign, phase: str, ns: str, pool: str, delay: float) -> float:
    """Drive the trial into ``phase``, kill and restart inside it; returns the restart time."""
    if phase == "registration":
        await harness.eventually(lambda: c.launched(pool), "a launched claim", SETTLE_S)
    elif phase in ("disruption", "termination"):
        await harness.eventually(lambda: c.running(ns, REPLICAS), "pods Running", SETTLE_S)
    if phase == "disruption":  # the node empties; consolidation removes it
        await c.kube.merge_patch(kc.DEPLOYMENTS, "app", {"spec": {"replicas": 0}}, ns)
    elif phase == "termination":  # a NodeClaim deleted by hand (or an interruption)
        for claim in await c.claims(pool):
            c.deleted.add(codec.name(claim))
            await c.kube.delete(kc.NODECLAIMS, codec.name(claim))
    return await c.kill_and_restart(delay)


async def _settle(c: Campaign, t: Trial, ns: str, pool: str) -> None:
    """Wait for the trial's end state; what never arrives is counted, not raised."""
    if t.phase == "disruption":
        probe = lambda: _none(c.claims(pool))  # noqa: E731 - a one-line probe
        what = "the empty node consolidated"
    else:
        probe = lambda: _replaced(c, ns, pool)  # noqa: E731
        what = "every pod Running (on a new node when the old one was deleted)"
    try:
        await harness.eventually(probe, what, SETTLE_S)
    except AssertionError:
        pods, _ = await c.kube.list(kc.PODS, ns)
        t.never_running = [codec.name(p) for p in pods if not _running(p)]
        t.evidence = await _evidence(c.kube, pool, pods)
        if t.phase == "disruption":
            t.stuck += [codec.name(x) for x in await c.claims(pool)]


def _conditions(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k["type"], k["status"]) for k in (obj.get("status") or {}).get("conditions", [])]


async def _evidence(kube: kc.KubeClient, pool: str, pods: list[dict[str, Any]]) -> list[str]:
    """What a trial that never settled left behind: its Nodes and claims, its pods' status."""
    nodes, _ = await kube.list(kc.NODES, label_selector=f"{lbl.NODEPOOL}={pool}")
    out = [
        f"node {codec.name(n)} taints={[t['key'] for t in codec.taints_of(n)]} "
        f"annotations={sorted(codec.meta(n).get('annotations') or {})} "
        f"conditions={_conditions(n)}"
        for n in nodes
    ]
    out += [
        f"claim {codec.name(x)} conditions={_conditions(x)}"
        for x in await harness.claims_of(kube, pool)
    ]
    out += [
        f"pod {codec.name(p)} node={p['spec'].get('nodeName')} phase="
        f"{(p.get('status') or {}).get('phase')} conditions="
        f"{[(k['type'], k.get('reason')) for k in (p.get('status') or {}).get('conditions', [])]}"
        for p in pods
    ]
    return out


async def _replaced(c: Campaign, ns: str, pool: str) -> bool:
    names = {codec.name(x) for x in await c.claims(pool)}
    return not names & c.deleted and await c.running(ns, REPLICAS)


async def _none(items: Any) -> bool:
    return not await items


async def _teardown(c: Campaign, t: Trial, ns: str, pool: str) -> None:
    """Delete the trial's namespace, pool and claims; what is still there after SETTLE_S
    (claims, or Nodes of the pool being deleted) is stuck on a finalizer."""
    await c.kube.delete(kc.NAMESPACES, ns)
    try:
        await c.kube.delete(kc.NODEPOOLS, pool)
    except errors.NotFound:
        pass

    async def gone() -> bool:
        claims = await c.claims(pool)
        for claim in claims:
            if not codec.meta(claim).get("deletionTimestamp"):
                try:
                    await c.kube.delete(kc.NODECLAIMS, codec.name(claim))
                except errors.NotFound:
                    pass
        nodes, _ = await c.kube.list(kc.NODES, label_selector=f"{lbl.NODEPOOL}={pool}")
        return not claims and not nodes

    try:
        await harness.eventually(gone, "claims and nodes finalized", SETTLE_S)
    except AssertionError:
        nodes, _ = await c.kube.list(kc.NODES, label_selector=f"{lbl.NODEPOOL}={pool}")
        t.stuck += [codec.name(x) for x in (*await c.claims(pool), *nodes)]


async def trial(c: Campaign, index: int, phase: str) -> Trial:
    """One trial (see the module docstring)."""
    t = Trial(phase, round(c.rng.uniform(0.0, KILL_WINDOW_S[phase]), 3))
    ns = await harness.namespace(c.kube)
    pool = f"{c.prefix}-{index}"
    since = RealClock().now() - 1.0
    await c.kube.create(kc.NODEPOOLS, nodepool(pool))
    await c.kube.create(kc.DEPLOYMENTS, deployment(pool), ns)
    t.restart_s = await _phase(c, phase, ns, pool, t.kill_after_s)
    await _settle(c, t, ns, pool)
    entries = audit.read(c.plane.local.audit_log, since=since, user=c.user)
    created = [e for e in audit.nodeclaim_creations(entries) if audit.pool_of(e) == pool]
    names = {e.name for e in created}
    t.claims_created = len(created)
    t.instances_launched = sum(
        1
        for e in entries
        if e.verb == "create" and e.resource == "configmaps" and e.code == 201 and e.name in names
    )
    t.duplicates = max(0, len(created) - EXPECTED_CLAIMS[phase])
    await _teardown(c, t, ns, pool)
    c.say(
        f"trial {index:3d} {phase:12s} kill@{t.kill_after_s:5.2f}s restart {t.restart_s:4.1f}s "
        f"claims {t.claims_created} instances {t.instances_launched} dup {t.duplicates} "
        f"never-running {len(t.never_running)} stuck {len(t.stuck)}"
    )
    return t


async def census(kube: kc.KubeClient, prefix: str) -> tuple[list[str], list[str]]:
    """Instance records of the campaign's pools no NodeClaim owns (leaks), and simulated Nodes
    of those pools with neither a record nor a claim (orphans)."""
    records, _ = await kube.list(
        kc.CONFIGMAPS, instances.NAMESPACE, label_selector=f"{instances.INSTANCE_LABEL}=true"
    )
    claims, _ = await kube.list(kc.NODECLAIMS)
    nodes, _ = await kube.list(kc.NODES)
    owned = {codec.name(x) for x in claims}

    def mine(obj: dict[str, Any]) -> bool:
        return str(codec.meta(obj).get("labels", {}).get(lbl.NODEPOOL, "")).startswith(prefix)

    kept = {codec.name(r) for r in records}
    leaks = sorted(codec.name(r) for r in records if mine(r) and codec.name(r) not in owned)
    orphans = sorted(codec.name(n) for n in nodes if mine(n) and codec.name(n) not in owned | kept)
    return leaks, orphans


async def _final_census(c: Campaign, report: Report) -> None:
    """Wait out the GC window; whatever is still unowned then is a leak."""
    start = time.monotonic()

    async def clean() -> bool:
        report.leaks, report.orphan_nodes = await census(c.kube, c.prefix)
        return not report.leaks and not report.orphan_nodes

    try:
        await harness.eventually(clean, "unowned instances collected", GC_WINDOW_S)
    except AssertionError:
        pass
    report.leak_wait_s = time.monotonic() - start


async def campaign(
    plane: ControlPlane, trials: int, seed: int, work: Path, say: Callable[[str], None] = print
) -> Report:
    """Run ``trials`` trials (phases in turn, kill times seeded) and count (module docstring)."""
    prefix = f"simcrash-{uuid.uuid4().hex[:4]}"
    user = f"karpenter-{prefix}"
    kubeconfig = plane.local.kubeconfig_for(user)
    controller = Controller(
        [
            "--cloud-provider", "simulated", "--kubeconfig", str(kubeconfig),
            "--catalog", "fake:8", "--boot-delay", str(BOOT_DELAY_S),
            "--startup-taint-delay", "1",
        ],
        base_env(),
        work / f"{prefix}.log",
    )  # fmt: skip
    report = Report(seed)
    controller.start()
    try:
        await anyio.to_thread.run_sync(controller.wait_for, LEADING_LINE)
        async with kc.connect(plane.kubeconfig) as kube:
            c = Campaign(plane, controller, kube, user, prefix, random.Random(seed), say)
            for i in range(trials):
                report.trials.append(await trial(c, i, PHASES[i % len(PHASES)]))
            await _final_census(c, report)
    finally:
        controller.stop()
        report.controller_starts = controller.starts
        report.kills = sum(1 for code in controller.exits if code == -signal.SIGKILL)
        report.crashes = sum(1 for code in controller.exits if code not in (-9, 0))
    return report
