"""Running one scenario against one controller on a fresh cluster, phase by phase.

For each phase the runner records what ``perf_suite`` prints: seconds (pods created → all
Running for scale-out; scale-down or template change → fleet settled for consolidation and
drift), node count, fleet price, CPU/memory utilisation, the controller's peak RSS and
CPU-seconds over the phase, pods not Running at the end, and a reference: the node count one
provisioning pass of this project's solver buys for the phase's pods on an empty cluster (the
"minimal" fleet consolidation should approach).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import yaml

from bench.perf import cluster, monitor, schedqueue, timeline
from bench.perf.processes import CATALOG, Controller, Sampler
from bench.perf.workloads import NAMESPACE, Phase, Scenario
from karpenter.aio.clock import RealClock
from karpenter.api import decode
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.kube import client as kc
from karpenter.kube import codec
from karpenter.providers.simulated.catalog import parse_catalog
from karpenter.sandbox.controlplane import LocalControlPlane

READY_TIMEOUT_S = 120.0
DUMP_AFTER_S = (40.0,)  # seconds into a consolidation phase to also dump the cluster
_DUMPED = (kc.NODEPOOLS, kc.NODES, kc.NODECLAIMS, kc.PODS)


async def dump(kube: kc.KubeClient, path: Path) -> None:
    """The cluster's NodePools, Nodes, NodeClaims and Pods as one YAML stream (the input of
    ``karpenter simulate``, with ``bench/kwok_catalog.yaml`` beside it)."""
    docs: list[dict[str, Any]] = []
    for resource in _DUMPED:
        items, _ = await kube.list(resource)
        for item in items:
            group = f"{resource.group}/" if resource.group else ""
            docs.append({"apiVersion": f"{group}{resource.version}", "kind": resource.kind, **item})
    await anyio.Path(path).write_text(yaml.safe_dump_all(docs, sort_keys=False))


@dataclass(frozen=True)
class PhaseResult:
    """One phase of one scenario for one controller."""

    scenario: str
    phase: str
    controller: str
    seconds: float
    settled: bool
    nodes: int
    price: float
    cpu_util: float
    memory_util: float
    peak_rss_mb: float
    cpu_s: float
    lost: int
    reference_nodes: int
    limit_s: float

    def row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def prices() -> dict[tuple[str, str, str], float]:
    """(instance type, zone, capacity type) → price, from the shared catalogue."""
    return {
        (it.name, o.zone, o.capacity_type): o.price
        for it in parse_catalog(str(CATALOG))
        for o in it.offerings
    }


async def _pool_ready(kube: kc.KubeClient) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not codec.condition_true(await kube.get(kc.NODEPOOLS, cluster.POOL), "Ready"):
        if time.monotonic() > deadline:
            raise TimeoutError("the NodePool never turned Ready (is the controller running?)")
        await anyio.sleep(0.5)


async def reference_nodes(kube: kc.KubeClient) -> int:
    """Nodes one pass of our solver buys for the running pods, on an empty cluster."""
    items, _ = await kube.list(kc.PODS, label_selector="testing/cluster=unspecified")
    pods = [
        dataclasses.replace(decode.pod(p), node_name="", phase="Pending")
        for p in items
        if not codec.meta(p).get("deletionTimestamp")
    ]
    pool = decode.node_pool(await kube.get(kc.NODEPOOLS, cluster.POOL))
    snapshot = Cluster(nodepools=(pool,), instance_types={pool.name: parse_catalog(str(CATALOG))})
    return len(solve(snapshot, pods, Options()).new_claims)


async def _act(kube: kc.KubeClient, phase: Phase) -> None:
    if phase.kind == "scale-out":
        for workload in phase.workloads:
            await kube.create(kc.DEPLOYMENTS, workload.manifest(), NAMESPACE)
    elif phase.kind == "consolidation":
        for name, replicas in sorted(phase.replicas.items()):
            scale: dict[str, Any] = {"spec": {"replicas": replicas}}
            await kube.merge_patch(kc.DEPLOYMENTS, name, scale, NAMESPACE)
    else:  # drift: any template change drifts every node
        mark = {"drift": str(RealClock().now())}
        template: dict[str, Any] = {"spec": {"template": {"metadata": {"annotations": mark}}}}
        await kube.merge_patch(kc.NODEPOOLS, cluster.POOL, template)


def _drift_done(kube: kc.KubeClient, since: float) -> Callable[[], Awaitable[bool]]:
    """Every NodeClaim was created after the template changed: each drifted node is replaced
    (judged from the objects, not from either controller's own hash annotations)."""

    async def done() -> bool:
        claims, _ = await kube.list(kc.NODECLAIMS)
        created = [codec.parse_time(codec.meta(c).get("creationTimestamp")) for c in claims]
        # creation timestamps have whole seconds
        return bool(claims) and all(t is not None and t >= int(since) for t in created)

    return done


async def run_phase(
    kube: kc.KubeClient,
    scenario: str,
    phase: Phase,
    controller: Controller,
    quiet_s: float,
    cap_s: float = float("inf"),
    audit_log: Path | None = None,
    work: Path | None = None,
    scheduler_port: int | None = None,
) -> PhaseResult:
    """Act, wait (at most upstream's limit for the phase, or ``cap_s``), measure (a scale-out
    also samples the kube-scheduler's queue, when its ``scheduler_port`` is given)."""
    wait_s = min(phase.limit_s, cap_s)
    sampler = Sampler(controller.pid)
    sampler.begin()
    table = prices()
    started = RealClock().now()
    await _act(kube, phase)
    settled = True
    queue = schedqueue.SchedulerQueue(scheduler_port, started) if scheduler_port else None
    if phase.kind == "scale-out":
        async with anyio.create_task_group() as tg:
            if queue is not None:
                tg.start_soon(queue.follow)
            seconds = await monitor.sampled(
                sampler, lambda: monitor.wait_running(kube, phase.pods, wait_s * 4, started)
            )
            tg.cancel_scope.cancel()
    else:
        extra = _drift_done(kube, started) if phase.kind == "drift" else None
        async with anyio.create_task_group() as tg:
            if work is not None:
                tg.start_soon(
                    _dumps, kube, work / f"dump-{scenario}-{controller.kind}-{phase.kind}"
                )
            seconds, settled = await monitor.sampled(
                sampler,
                lambda: monitor.wait_settled(kube, table, phase.pods, quiet_s, wait_s, extra),
            )
            tg.cancel_scope.cancel()
    cpu_s = sampler.cpu()
    fleet = await monitor.fleet(kube, table)
    if phase.kind == "scale-out":
        # where the seconds went, beside the controller's log (``--work`` keeps both)
        line = await timeline.collect(kube, started, NAMESPACE, controller.log, audit_log)
        out = controller.log.with_name(f"timeline-{scenario}-{controller.kind}.md")
        text = line.table() + "\n"
        if queue is not None:
            text += "\nkube-scheduler queue (cumulative attempts)\n\n" + queue.table() + "\n"
        out.write_text(text, encoding="utf-8")
    if work is not None:
        await dump(kube, work / f"dump-{scenario}-{controller.kind}-{phase.kind}-end.yaml")
    return PhaseResult(
        scenario,
        phase.kind,
        controller.kind,
        seconds,
        settled,
        fleet.nodes,
        fleet.price,
        fleet.cpu_util,
        fleet.memory_util,
        sampler.peak_rss_mb,
        cpu_s,
        phase.pods - fleet.running,
        await reference_nodes(kube),
        phase.limit_s,
    )


async def _dumps(kube: kc.KubeClient, stem: Path) -> None:
    """Dump the cluster ``DUMP_AFTER_S`` into the phase (before consolidation acts)."""
    waited = 0.0
    for at in DUMP_AFTER_S:
        await anyio.sleep(at - waited)
        waited = at
        await dump(kube, Path(f"{stem}-{int(at)}s.yaml"))


def run_scenario(
    scenario: Scenario,
    kind: str,
    work: Path,
    quiet_s: float,
    profile: bool = False,
    cap_s: float = float("inf"),
    audit: bool = False,
) -> list[PhaseResult]:
    """Every phase of ``scenario`` against controller ``kind`` on a fresh cluster (``audit``:
    the apiserver logs writes, for the scale-out timeline)."""
    work.mkdir(parents=True, exist_ok=True)
    with cluster.perf_cluster(work, audit=audit) as plane:
        controller = Controller(kind, plane.kubeconfig, work / f"controller-{kind}.log")
        if profile:
            controller.profile = work / f"profile-{kind}.txt"
        return anyio.run(_scenario, plane, scenario, controller, quiet_s, cap_s, work)


async def _scenario(
    plane: LocalControlPlane,
    scenario: Scenario,
    controller: Controller,
    quiet_s: float,
    cap_s: float,
    work: Path,
) -> list[PhaseResult]:
    kind = controller.kind
    async with cluster.connected(plane) as kube:
        await cluster.prepare(kube, kind)
        controller.start()
        try:
            await _pool_ready(kube)
            results = []
            for phase in scenario.phases:
                audit = plane.audit_log if plane.audit_log.exists() else None
                result = await run_phase(
                    kube,
                    scenario.name,
                    phase,
                    controller,
                    quiet_s,
                    cap_s,
                    audit,
                    work,
                    plane.scheduler_port,
                )
                results.append(result)
                if not controller.alive():
                    raise RuntimeError(f"{kind} controller died; see {controller.log}")
            return results
        finally:
            controller.stop()
