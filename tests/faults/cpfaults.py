"""Control-plane faults (matrix item 3): apiserver restarts, etcd compaction, write conflicts.

The controller runs in-process (simulated cloud) against the fault plane. Three rounds, each a
pod that needs a node of its own, each with one fault struck while that pod is being provisioned:

- ``restart``: kube-apiserver is stopped and started (etcd keeps the data); every watch is cut
  and resumes against a fresh watch cache;
- ``compact``: after some churn etcd is compacted at its head revision (its HTTP gateway), then
  the apiserver restarts, so every resumed watch is answered 410 Gone and must relist (etcd is
  checked to refuse a read below the compacted revision: the history is really gone);
- ``conflict``: a concurrent writer bumps an annotation on every NodeClaim and Node of the
  pool every 20 ms (each bump a new resourceVersion), while one NodeClaim is deleted.

Counted: NodeClaims created beyond one per round (duplicates), the deleted claim or its Node
still present at the end (lost deletions), pods never bound, informers' relists.
"""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from karpenter.kube import client as kc
from karpenter.kube import errors
from karpenter.operator import Operator
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

SETTLE_S = 90.0
FAULTS = ("restart", "compact", "conflict")


@dataclass
class Report:
    """What the rounds counted."""

    duplicates: int = 0
    lost_deletions: list[str] = field(default_factory=list)
    unplaced: int = 0
    relists: int = 0
    gone_410: bool = False  # etcd refused a read below the compacted revision
    bumps: int = 0  # conflicting writes made
    rounds: list[str] = field(default_factory=list)


def _compacted(etcd_port: int, revision: int) -> bool:
    """etcd refuses a read at ``revision``: that history is gone (what 410 Gone reports)."""
    url = f"http://127.0.0.1:{etcd_port}/v3/kv/range"
    body = json.dumps({"key": "AA==", "revision": revision}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except urllib.error.HTTPError as err:
        return "compacted" in err.read().decode()
    return False


async def _bumper(kube: kc.KubeClient, pool: str, report: Report) -> None:
    """The concurrent writer: a new resourceVersion on the pool's claims and Nodes, always."""
    for n in itertools.count():
        for claim in await harness.claims_of(kube, pool):
            patch = {"metadata": {"annotations": {"faults.karpenter.test/bump": str(n)}}}
            node = (claim.get("status") or {}).get("nodeName", "")
            for res, name in ((kc.NODECLAIMS, claim["metadata"]["name"]), (kc.NODES, node)):
                if not name:
                    continue
                try:
                    await kube.merge_patch(res, name, patch)
                    report.bumps += 1
                except errors.NotFound:
                    pass
        await anyio.sleep(0.02)


async def _strike(
    fault: str, plane: ControlPlane, kube: kc.KubeClient, before: list[str], report: Report
) -> list[str]:
    """Strike ``fault``; returns NodeClaims deleted on purpose (one of ``before``: a claim
    that was not made for this round's pod, whose bare pods simply go away)."""
    local = plane.local
    if fault == "restart":
        await anyio.to_thread.run_sync(local.restart_apiserver)
    elif fault == "compact":
        for i in range(20):  # churn, so the compacted history is not empty
            await kube.merge_patch(
                kc.NAMESPACES, "default", {"metadata": {"labels": {"c": str(i)}}}
            )
        revision = await anyio.to_thread.run_sync(local.compact_etcd)
        report.gone_410 = _compacted(local.etcd_port, revision - 1)
        await anyio.to_thread.run_sync(local.restart_apiserver)
    else:
        victim = sorted(before)[0]
        await kube.delete(kc.NODECLAIMS, victim)
        return [victim]
    return []


async def _deleted_everywhere(kube: kc.KubeClient, names: list[str], nodes: list[str]) -> bool:
    claims, _ = await kube.list(kc.NODECLAIMS)
    present = {c["metadata"]["name"] for c in claims}
    all_nodes, _ = await kube.list(kc.NODES)
    node_names = {n["metadata"]["name"] for n in all_nodes}
    return not (set(names) & present) and not (set(nodes) & node_names)


async def experiment(plane: ControlPlane, say: Callable[[str], None] = print) -> Report:
    """The three rounds (module docstring)."""
    report = Report()
    async with harness.running(plane.kubeconfig) as op:
        async with kc.connect(plane.kubeconfig) as kube:
            pool = harness.unique("cpf")
            ns = await harness.namespace(kube)
            await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
            await kube.create(kc.PODS, harness.pod("seed", pool, cpu="3"), ns)
            await harness.eventually(lambda: _bound(kube, ns, 1), "the first pod bound")
        for round_no, fault in enumerate(FAULTS, 1):
            await _round(op, plane, pool, ns, round_no, fault, report)
            say(f"round {fault}: {report}")
        async with kc.connect(plane.kubeconfig) as kube:
            await harness.cleanup(kube, pool, ns)
        report.relists = sum(i.relists for i in op.informers) - len(op.informers)
    return report


async def _round(
    op: Operator, plane: ControlPlane, pool: str, ns: str, n: int, fault: str, report: Report
) -> None:
    # a fresh client per round: the old one's connections die with the apiserver
    async with kc.connect(plane.kubeconfig) as kube, anyio.create_task_group() as tg:
        created = len(op.provisioner.created_at)
        before = [c["metadata"]["name"] for c in await harness.claims_of(kube, pool)]
        if fault == "conflict":
            tg.start_soon(_bumper, kube, pool, report)
        await kube.create(kc.PODS, harness.pod(f"{fault}-{n}", pool, cpu="3"), ns)
        nodes = await _nodes_of(kube, before)
        victims = await _strike(fault, plane, kube, before, report)
        nodes = [n for c, n in zip(before, nodes, strict=True) if c in victims]
        async with kc.connect(plane.kubeconfig) as fresh:
            try:
                await harness.eventually(lambda: _all_bound(fresh, ns), "pods bound", SETTLE_S)
            except AssertionError:
                report.unplaced += 1
            try:
                await harness.eventually(
                    lambda: _deleted_everywhere(fresh, victims, nodes), "deletions", SETTLE_S
                )
            except AssertionError:
                report.lost_deletions += victims
        made = len(op.provisioner.created_at) - created
        report.duplicates += max(0, made - 1)
        report.rounds.append(f"{fault}: {made} claim(s)")
        tg.cancel_scope.cancel()


async def _nodes_of(kube: kc.KubeClient, claims: list[str]) -> list[str]:
    out = []
    for name in claims:
        try:
            obj = await kube.get(kc.NODECLAIMS, name)
        except errors.NotFound:
            out.append("")
            continue
        out.append((obj.get("status") or {}).get("nodeName", ""))
    return out


async def _bound(kube: kc.KubeClient, ns: str, count: int) -> bool:
    pods, _ = await kube.list(kc.PODS, ns)
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


async def _all_bound(kube: kc.KubeClient, ns: str) -> bool:
    pods, _ = await kube.list(kc.PODS, ns)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return bool(live) and all(p["spec"].get("nodeName") for p in live)
