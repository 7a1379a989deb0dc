"""Drains under pressure (matrix item 5): PDBs, do-not-disrupt, consolidation, drift and
expiration at once, on kwok, with an observer counting every PDB breach and every pod that never
came back.

The controller runs in-process on the simulated cloud; kwok (beside the fault plane) is the
kubelet of its Nodes: bound pods turn Running and Ready, a deleted pod stays terminating until
its ``deletionTimestamp`` (deletion + its grace period) and only then goes; the
kube-controller-manager's ReplicaSets bring evicted pods back. Seeded random Deployments (each
pod with a terminationGracePeriodSeconds of 1-5 s) each get a PDB (minAvailable /
maxUnavailable, integer or percent). Their NodePool consolidates at once, expires nodes after
``EXPIRE`` and drifts mid-run; a second pool holds ``karpenter.sh/do-not-disrupt`` pods on
nodes that expire too, with a short NodePool ``terminationGracePeriod``: those pods may only go
at that deadline.

The observer samples every 0.25 s: a PDB is breached when fewer of its pods are healthy
(Ready, bound, not terminating) than it demands; a do-not-disrupt pod is lost early when it
disappears before its node's claim deletion + terminationGracePeriod; a pod's grace is cut
when it was deleted with a shorter grace than its spec asks (``deletionGracePeriodSeconds``)
outside a node's deadline, and not honoured when it disappeared before its
``deletionTimestamp``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from karpenter.kube import codec
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.faults import crash

EXPIRE, DND_EXPIRE, DND_TGP = "45s", "30s", 20.0
DND_POD_GRACE = 5  # the do-not-disrupt pods' own grace (below the node's deadline)
CHAOS_S, SETTLE_S, SAMPLE_S = 75.0, 150.0, 0.25


@dataclass(frozen=True)
class Workload:
    name: str
    replicas: int
    cpu: str
    pdb: dict[str, Any]  # {"minAvailable": ...} or {"maxUnavailable": ...}
    grace: int = 0  # the pods' terminationGracePeriodSeconds

    def desired_healthy(self) -> int:
        """The healthy pods the PDB demands (the disruption controller's rounding)."""
        ((key, value),) = self.pdb.items()
        if isinstance(value, str):  # a percentage: minAvailable rounds up, maxUnavailable too
            count = math.ceil(self.replicas * int(value.rstrip("%")) / 100)
        else:
            count = value
        return count if key == "minAvailable" else self.replicas - count


@dataclass
class Report:
    seed: int
    workloads: list[Workload] = field(default_factory=list)
    samples: int = 0
    breaches: list[str] = field(default_factory=list)  # "<pdb> healthy h < desired d"
    never_back: list[str] = field(default_factory=list)
    dnd_early: list[str] = field(default_factory=list)  # do-not-disrupt pods gone too soon
    dnd_forced: int = 0  # do-not-disrupt pods removed at their grace deadline
    terminating_seen: int = 0  # pods seen terminating (kwok holding them for their grace)
    grace_cut: list[str] = field(default_factory=list)  # deleted with less grace than asked
    grace_not_honoured: list[str] = field(default_factory=list)  # gone before deletionTimestamp
    claims_deleted: int = 0
    evictions_seen: int = 0  # pods of PDB workloads that went away (evicted or drained)


def workloads(rng: random.Random, count: int) -> list[Workload]:
    out = []
    for i in range(count):
        replicas = rng.randint(2, 5)
        kind = rng.choice(["minAvailable", "maxUnavailable"])
        if rng.random() < 0.5:
            value: int | str = f"{rng.choice([20, 34, 50, 67])}%"
        else:
            value = rng.randint(1, replicas - 1)
        cpu = rng.choice(["200m", "400m", "700m"])
        out.append(Workload(f"w{i}", replicas, cpu, {kind: value}, rng.randint(1, 5)))
    return out


def _pdb(w: Workload) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": w.name},
        "spec": {"selector": {"matchLabels": {"app": w.name}}, **w.pdb},
    }


def _deployment(
    w: Workload, pool: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    body = crash.deployment(pool, w.replicas, w.cpu)
    body["metadata"]["name"] = w.name
    labels = {"app": w.name}
    body["spec"]["selector"] = {"matchLabels": labels}
    body["spec"]["template"]["metadata"] = {"labels": labels, "annotations": annotations or {}}
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = w.grace
    return body


def _pool(name: str, expire: str, tgp: str, consolidate: bool) -> dict[str, Any]:
    body = harness.nodepool(name)
    spec = body["spec"]
    spec["template"]["spec"]["expireAfter"] = expire
    spec["template"]["spec"]["terminationGracePeriod"] = tgp
    spec["disruption"] = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized" if consolidate else "WhenEmpty",
        "consolidateAfter": "0s" if consolidate else "Never",
        "budgets": [{"nodes": "50%"}],
    }
    return body


def _healthy(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp") or not pod["spec"].get("nodeName"):
        return False
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


@dataclass
class Observer:
    kube: kc.KubeClient
    ns: str
    report: Report
    armed: bool = False  # breaches count once every workload was whole once
    dnd: dict[str, str] = field(default_factory=dict)  # do-not-disrupt pod uid → node
    deleting: dict[str, float] = field(default_factory=dict)  # node → its claim's deletion
    seen: set[str] = field(default_factory=set)  # uids of PDB workloads' pods
    breached: set[str] = field(default_factory=set)
    terminating: dict[str, float] = field(default_factory=dict)  # uid → its deletionTimestamp

    async def run(self) -> None:
        while True:
            await self.sample()
            await anyio.sleep(SAMPLE_S)

    async def sample(self) -> None:
        pods, _ = await self.kube.list(kc.PODS, self.ns)
        claims, _ = await self.kube.list(kc.NODECLAIMS)
        for c in claims:
            node = (c.get("status") or {}).get("nodeName", "")
            stamp = codec.parse_time(c["metadata"].get("deletionTimestamp"))
            if node and stamp is not None:
                self.deleting.setdefault(node, stamp)
        self.report.samples += 1
        by_app: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            by_app.setdefault(p["metadata"].get("labels", {}).get("app", ""), []).append(p)
        self._pdbs(by_app)
        self._dnd(by_app.get("dnd", []))
        self._graceful(pods)

    def _pdbs(self, by_app: dict[str, list[dict[str, Any]]]) -> None:
        whole = True
        live_uids = set()
        for w in self.report.workloads:
            mine = by_app.get(w.name, [])
            live_uids |= {p["metadata"]["uid"] for p in mine}
            healthy = sum(1 for p in mine if _healthy(p))
            whole &= healthy >= w.replicas
            if self.armed and healthy < w.desired_healthy():
                if w.name not in self.breached:
                    self.report.breaches.append(
                        f"{w.name} {w.pdb}: {healthy} < {w.desired_healthy()}"
                    )
                self.breached.add(w.name)
            else:
                self.breached.discard(w.name)
        gone = self.seen - live_uids
        self.report.evictions_seen += len(gone)
        self.seen = (self.seen & live_uids) | live_uids
        self.armed |= whole

    def _dnd(self, pods: list[dict[str, Any]]) -> None:
        now = RealClock().now()
        live = {p["metadata"]["uid"]: p["spec"].get("nodeName", "") for p in pods}
        for uid, node in list(self.dnd.items()):
            if uid in live:
                continue
            del self.dnd[uid]
            started = self.deleting.get(node)
            if started is None or now < started + DND_TGP - 1.0:
                self.report.dnd_early.append(f"{uid} on {node}")
            else:
                self.report.dnd_forced += 1
        self.dnd.update({u: n for u, n in live.items() if n})

    def _graceful(self, pods: list[dict[str, Any]]) -> None:
        """Each deleted pod: asked grace kept, and present until its deletionTimestamp."""
        now = RealClock().now()
        live = set()
        for p in pods:
            meta, uid = p["metadata"], p["metadata"]["uid"]
            live.add(uid)
            stamp = codec.parse_time(meta.get("deletionTimestamp"))
            if stamp is None or uid in self.terminating:
                continue
            self.terminating[uid] = stamp
            self.report.terminating_seen += 1
            asked = int(p["spec"].get("terminationGracePeriodSeconds") or 0)
            given = int(meta.get("deletionGracePeriodSeconds") or 0)
            node = p["spec"].get("nodeName", "")
            # a do-not-disrupt pod may be cut short to meet its node's deadline, nothing else
            deadline = node in self.deleting and meta.get("labels", {}).get("app") == "dnd"
            if given < asked and not deadline:
                self.report.grace_cut.append(f"{meta['name']}: {given}s < {asked}s")
        for uid in [u for u in self.terminating if u not in live]:
            stamp = self.terminating.pop(uid)
            if now < stamp - SAMPLE_S:  # gone before kwok's kubelet should have let it go
                self.report.grace_not_honoured.append(f"{uid}: {stamp - now:.1f}s early")


async def _whole(kube: kc.KubeClient, ns: str, ws: list[Workload]) -> list[str]:
    pods, _ = await kube.list(kc.PODS, ns)
    missing = []
    for w in ws:
        healthy = sum(
            1 for p in pods if p["metadata"].get("labels", {}).get("app") == w.name and _healthy(p)
        )
        if healthy < w.replicas:
            missing.append(f"{w.name}: {healthy}/{w.replicas}")
    return missing


async def experiment(
    plane: ControlPlane, seed: int, count: int = 4, say: Callable[[str], None] = print
) -> Report:
    """One run (module docstring)."""
    rng = random.Random(seed)
    report = Report(seed, workloads(rng, count))
    async with harness.running(plane.kubeconfig, disruption_timing=(2.0, 3.0)) as op:
        async with kc.connect(plane.kubeconfig) as kube, anyio.create_task_group() as tg:
            ns = await harness.namespace(kube)
            pool, dnd_pool = harness.unique("drain"), harness.unique("dnd")
            await kube.create(kc.NODEPOOLS, _pool(pool, EXPIRE, "10m", True))
            await kube.create(kc.NODEPOOLS, _pool(dnd_pool, DND_EXPIRE, f"{DND_TGP:.0f}s", False))
            for w in report.workloads:
                await kube.create(kc.PDBS, _pdb(w), ns)
                await kube.create(kc.DEPLOYMENTS, _deployment(w, pool), ns)
            dnd = Workload("dnd", 2, "300m", {"maxUnavailable": 0}, DND_POD_GRACE)
            annotations = {"karpenter.sh/do-not-disrupt": "true"}
            await kube.create(kc.DEPLOYMENTS, _deployment(dnd, dnd_pool, annotations), ns)
            observer = Observer(kube, ns, report)
            tg.start_soon(observer.run)
            await anyio.sleep(CHAOS_S / 3)
            # drift: the template changes under every node of the pool
            patch = {"spec": {"template": {"metadata": {"labels": {"faults/rev": "2"}}}}}
            await kube.merge_patch(kc.NODEPOOLS, pool, patch)
            await anyio.sleep(CHAOS_S / 3)
            # consolidation: the biggest workload shrinks, leaving room to pack
            biggest = max(report.workloads, key=lambda w: w.replicas)
            await kube.merge_patch(kc.DEPLOYMENTS, biggest.name, {"spec": {"replicas": 2}}, ns)
            report.workloads[report.workloads.index(biggest)] = replace(biggest, replicas=2)
            await anyio.sleep(CHAOS_S / 3)
            try:
                await harness.eventually(
                    lambda: _none(_whole(kube, ns, report.workloads)), "all replicas back", SETTLE_S
                )
            except AssertionError:
                report.never_back = await _whole(kube, ns, report.workloads)
            report.claims_deleted = int(
                sum(
                    sample.value
                    for family in op.metrics.registry.collect()
                    for sample in family.samples
                    if sample.name == "karpenter_nodeclaims_terminated_total"
                )
            )
            tg.cancel_scope.cancel()
        async with kc.connect(plane.kubeconfig) as kube:
            await kube.delete(kc.NODEPOOLS, dnd_pool)
            await harness.cleanup(kube, pool, ns)
    say(f"seed {seed}: {report}")
    return report


async def _none(items: Any) -> bool:
    return not await items
