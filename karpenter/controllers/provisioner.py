"""The provisioner: batch pending pods, solve on a snapshot, create the NodeClaims decided.

Triggers come from the state mirror (a provisionable pod appeared or changed, a NodeClaim went
away, a NodePool changed) and from a resync every 10 s while pods stay provisionable (as
upstream's pod trigger requeues), so pods whose claim failed to launch are retried. After a
window closes the pass waits until every NodeClaim in state has launched: solving around a
claim whose shape is unknown risks launching twice for the same pods.

The pass takes the snapshot and the pending pods from the mirror in one synchronous step (no
await between them), runs the same pure ``solve`` as ``karpenter simulate`` in a worker
thread (the event loop keeps serving watches and leases), then creates the NodeClaims
concurrently and records each in the mirror at once, so the next pass counts it as capacity.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
import anyio.abc
import anyio.to_thread

from karpenter.aio.batcher import Batcher
from karpenter.cloud.provider import CloudProvider, CloudProviderError
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.controllers.spreadselectors import SpreadSelectors
from karpenter.core.buffers import is_virtual
from karpenter.core.model.cluster import Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod, TopologySpread
from karpenter.core.provisioning import lowerbound
from karpenter.core.provisioning import overlays as overlay_types
from karpenter.core.provisioning.results import NewNodeClaim, Results
from karpenter.core.provisioning.scheduler import solve
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, KubeClient, Obj
from karpenter.observability.metrics import Metrics
from karpenter.state.cluster import ClusterState, is_provisionable

RESYNC_S = 10.0
HISTORY = 1000  # passes kept in ``passes``
HISTORY_KEYS = 20_000  # claims / pods kept in ``created_at`` / ``placed_at``
SYNC_WAIT_S = 10.0
FAILED_SCHEDULING_DEDUPE_S = 300.0


@dataclass(frozen=True, slots=True)
class PassReport:
    """What one pass did (for logs, tests and the benchmark)."""

    pods: int
    created: tuple[str, ...]
    unschedulable: Mapping[str, str]


async def instance_types(
    cloud: CloudProvider,
    state: ClusterState,
    pools: Sequence[NodePool],
    now: float,
    options: Options,
    log: Any,
) -> dict[str, tuple[InstanceType, ...]]:
    """Each NodePool's instance types as a pass sees them: the cloud's, less the offerings
    known to be out of capacity, with NodeOverlays applied when the gate is on."""
    types: dict[str, tuple[InstanceType, ...]] = {}
    overlays = tuple(state.overlays.values()) if options.node_overlay else ()
    for pool in pools:
        try:
            offered = await cloud.instance_types(pool)
        except CloudProviderError as err:
            log.warning("no instance types", nodepool=pool.name, error=str(err))
            continue
        usable = state.unavailable.apply(offered, now)
        types[pool.name] = overlay_types.apply(pool, usable, overlays) if overlays else usable
    return types


async def create_nodeclaim(
    kube: KubeClient,
    state: ClusterState,
    metrics: Metrics,
    claim: NewNodeClaim,
    pool: NodePool,
    reason: str,
    log: Any,
    annotations: Mapping[str, str] | None = None,
) -> str:
    """Create one of the solver's NodeClaims; its name, or "" when the API refused it.

    The answer goes into the mirror at once so the next pass (of any controller) counts it.
    ``reason`` labels ``karpenter_nodeclaims_created_total`` (provisioned, or the disruption
    reason of a replacement).
    """
    pool_obj = state.nodepools.raw(pool.name)
    if pool_obj is None:
        return ""
    body = codec.nodeclaim_manifest(claim, pool, pool_obj, annotations)
    try:
        obj = await kube.create(NODECLAIMS, body)
    except (errors.ApiError, aiohttp.ClientError, OSError) as err:
        # An unreachable apiserver (e.g. restarting) fails this claim only; the pods stay
        # pending and the next pass retries. Raising would end the pass's whole task group.
        log.error("creating nodeclaim failed", nodepool=pool.name, error=str(err))
        return ""
    state.nodeclaims.upsert(obj)
    name = codec.name(obj)
    metrics.nodeclaims_created.labels(
        reason=reason,
        nodepool=pool.name,
        min_values_relaxed=str(claim.min_values_relaxed).lower(),
    ).inc()
    log.info(
        "created nodeclaim",
        nodeclaim=name,
        nodepool=pool.name,
        reason=reason,
        pods=len(claim.pods),
        instance_types=len(claim.instance_types),
    )
    return name


class Provisioner(Controller):
    """The provisioning loop (a singleton: runs only on the leader)."""

    # Set by the composition root when CapacityBuffers are on: the buffers' virtual pods,
    # scheduled with the real pending pods of every pass but never nominated or reported.
    extra_pods: Callable[[], Sequence[Pod]] | None = None

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        batch_idle_s: float,
        batch_max_s: float,
        default_spread: Sequence[TopologySpread] = (),
    ) -> None:
        super().__init__(ctx, "provisioner")
        # SCHEDULER_CONFIG's default constraints, added to pods that declare none
        self.default_spread = tuple(default_spread)
        # How long a placement keeps its node from being disrupted (upstream: the longer of
        # twice the batch window and 10 s); every pass that places the pod again renews it.
        self.nomination_s = max(2 * batch_max_s, 10.0)
        self.batcher: Batcher[str] = Batcher(self.clock, batch_idle_s, batch_max_s)
        # Recent history for logs, tests and the latency benchmark, bounded: the controller
        # runs for months and must not grow with every pass, claim and pod it ever saw.
        self.passes: deque[PassReport] = deque(maxlen=HISTORY)
        self.created_at: dict[str, float] = {}
        # pod key → when the NodeClaim meant for it was created (latency measurements)
        self.placed_at: dict[str, float] = {}
        # pod key → the reason last logged for it (each pass sees every pending pod, so this
        # holds exactly the pods unschedulable in the last pass)
        self.unschedulable: dict[str, str] = {}
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "Pod":
            pod = self.state.pods.get(key)
            if pod is not None and is_provisionable(pod):
                self.batcher.trigger(key)
        elif (kind == "NodeClaim" and obj is None) or kind == "NodePool":
            self.trigger_all()

    def trigger_all(self) -> None:
        """Trigger for every provisionable pod (a resync)."""
        for pod in self.state.provisionable_pods():
            self.batcher.trigger(pod.key)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Batch, solve and launch, forever."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._resync)
            self.trigger_all()
            task_status.started()
            while True:
                await self.batcher.wait()
                try:
                    await self.provision()
                except (errors.ApiError, aiohttp.ClientError, OSError, CloudProviderError) as err:
                    self._log.warning("provisioning pass failed", error=str(err))

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(RESYNC_S)
            self.trigger_all()

    async def _await_synced(self) -> None:
        deadline = self.clock.now() + SYNC_WAIT_S
        while not self.state.synced() and self.clock.now() < deadline:
            await self.clock.sleep(0.05)

    async def provision(self) -> PassReport:
        """One pass over every provisionable pod."""
        await self._await_synced()
        pools = self.state.active_nodepools()
        types = await instance_types(
            self.cloud, self.state, pools, self.clock.now(), self.options, self._log
        )
        # Snapshot and pending pods in one synchronous step: no event can slip in between.
        cluster = self.state.snapshot(types)
        pending = self.state.provisionable_pods()
        virtual = list(self.extra_pods()) if self.extra_pods is not None else []
        if not pending and not virtual:
            self.unschedulable = {}
            report = PassReport(0, (), {})
            self.passes.append(report)
            return report
        if self.default_spread:
            pending = await SpreadSelectors(self.kube).apply(pending, self.default_spread)
        started = self.clock.now()
        results: Results = await anyio.to_thread.run_sync(
            functools.partial(solve, cluster, [*pending, *virtual], self.options, bound=True)
        )
        self.metrics.scheduler_scheduling_duration.labels(controller="provisioner").observe(
            self.clock.now() - started
        )
        self.metrics.scheduler_unschedulable_pods_count.labels(controller="provisioner").set(
            len(results.unschedulable)
        )
        cost = lowerbound.cost(results.price, results.lower_bound)
        self._record_cost(cost)
        created = await self._create_all(results, {p.name: p for p in pools})
        await self._report_nominations(results)
        await self._report_unschedulable(results)
        self._log_unschedulable(results)
        report = PassReport(len(pending), tuple(created), dict(results.unschedulable))
        self.passes.append(report)
        self._log.info(
            "provisioning pass",
            pods=len(pending),
            nodeclaims=len(created),
            unschedulable=len(results.unschedulable),
            cost_per_hour=cost.per_hour,
            cost_lower_bound_per_hour=cost.lower_bound_per_hour,
            cost_ratio=cost.ratio,
        )
        return report

    def _record_cost(self, cost: lowerbound.Cost) -> None:
        m = self.metrics
        m.scheduler_new_nodeclaims_price_per_hour.labels(controller="provisioner").set(
            cost.per_hour
        )
        m.scheduler_new_nodeclaims_price_lower_bound_per_hour.labels(controller="provisioner").set(
            cost.lower_bound_per_hour
        )
        if cost.ratio is not None:
            m.scheduler_new_nodeclaims_price_ratio.labels(controller="provisioner").set(cost.ratio)

    async def _create_all(self, results: Results, pools: Mapping[str, NodePool]) -> list[str]:
        created: list[str] = []

        async def one(claim: NewNodeClaim) -> None:
            name = await self._create(claim, pools[claim.nodepool])
            if name:
                created.append(name)
                until = self.clock.now() + self.nomination_s
                for pod in claim.pods:
                    if not is_virtual(pod):
                        self.state.nominate(pod.key, name, until)

        async with anyio.create_task_group() as tg:
            for claim in results.new_claims:
                tg.start_soon(one, claim)
        return sorted(created)

    async def _create(self, claim: NewNodeClaim, pool: NodePool) -> str:
        name = await create_nodeclaim(
            self.kube, self.state, self.metrics, claim, pool, "provisioned", self._log
        )
        if not name:
            return ""
        self.created_at[name] = self.clock.now()
        _trim(self.created_at)
        for pod in claim.pods:
            self.placed_at[pod.key] = self.created_at[name]
        _trim(self.placed_at)
        for pod in claim.pods:
            if is_virtual(pod):
                continue
            await self.recorder.publish(
                codec.pod_reference(pod),
                events.NORMAL,
                "Nominated",
                f"Pod should schedule on: nodeclaim/{name}",
            )
        return name

    async def _report_nominations(self, results: Results) -> None:
        """Pods the pass placed on existing or in-flight capacity (deduplicated per node)."""
        until = self.clock.now() + self.nomination_s
        for node_name, placed in results.existing:
            pods = [p for p in placed if not is_virtual(p)]
            for pod in pods:
                self.state.nominate(pod.key, node_name, until)
            kind = "node" if self.state.nodes.raw(node_name) is not None else "nodeclaim"
            for pod in pods:
                await self.recorder.publish(
                    codec.pod_reference(pod),
                    events.NORMAL,
                    "Nominated",
                    f"Pod should schedule on: {kind}/{node_name}",
                )

    def _log_unschedulable(self, results: Results) -> None:
        """Log each pod that became unschedulable (or whose reason changed) once; the pass
        line only counts them. CapacityBuffers' virtual pods are not pods: not logged."""
        real = {k: r for k, r in results.unschedulable.items() if self.state.pods.get(k)}
        for key, reason in sorted(real.items()):
            if self.unschedulable.get(key) != reason:
                self._log.info("pod is unschedulable", pod=key, reason=reason)
        self.unschedulable = real

    async def _report_unschedulable(self, results: Results) -> None:
        for key, reason in sorted(results.unschedulable.items()):
            pod = self.state.pods.get(key)
            if pod is None:
                continue
            await self.recorder.publish(
                codec.pod_reference(pod),
                events.WARNING,
                "FailedScheduling",
                f"Failed to schedule pod, {reason}",
                dedupe_s=FAILED_SCHEDULING_DEDUPE_S,
            )


def _trim(times: dict[str, float]) -> None:
    """Forget the oldest entries (dicts keep insertion order) beyond ``HISTORY_KEYS``."""
    excess = len(times) - HISTORY_KEYS
    if excess > 0:
        for key in list(itertools.islice(times, excess)):
            del times[key]
