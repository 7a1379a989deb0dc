"""The operator: the composition root of ``karpenter run``, owner of the one top task group.

It takes one ``ControllerContext`` (built once by the composition root from the host and the
provider's plug) and builds the rest by constructor injection (no globals): the informers
feeding the mirror (plus the provider's own), the controllers it runs (a list, feature-gated
ones included), the metrics/health server and the leader elector. Informers and the HTTP
server run on every replica, so a standby has a warm mirror and answers probes; the
controllers run only while this replica holds the leader Lease (``LeaderElector`` cancels
them when it is lost). ``run_until_signalled`` turns SIGTERM or SIGINT into a cancellation of
that task group, so every task unwinds through its ``finally`` blocks (the Lease is released,
sockets closed) before the process exits.
"""

from __future__ import annotations

import signal
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import anyio
import anyio.abc

from karpenter.aio.clock import Clock
from karpenter.api import schedulerconfig
from karpenter.cloud.plugin import Service
from karpenter.controllers.capacity_buffers import CapacityBuffers
from karpenter.controllers.condition_metrics import ConditionMetrics
from karpenter.controllers.consistency import Consistency
from karpenter.controllers.consolidatable import ConsolidatableWatch
from karpenter.controllers.context import ControllerContext
from karpenter.controllers.disruption import POLL_S as DISRUPTION_POLL_S
from karpenter.controllers.disruption import VALIDATION_S as DISRUPTION_VALIDATION_S
from karpenter.controllers.disruption import Disruption
from karpenter.controllers.drift import DriftWatch
from karpenter.controllers.lifecycle import Lifecycle
from karpenter.controllers.node_health import NodeHealth
from karpenter.controllers.node_termination import NodeTermination
from karpenter.controllers.nodeclaim_gc import NodeClaimGC
from karpenter.controllers.nodepool import NodePoolStatus
from karpenter.controllers.nominations import NominationPublisher
from karpenter.controllers.podevents import PodEvents
from karpenter.controllers.provisioner import Provisioner
from karpenter.controllers.registration_health import RegistrationHealth
from karpenter.controllers.state_metrics import StateMetrics
from karpenter.controllers.static_capacity import StaticCapacity
from karpenter.controllers.termination import Termination
from karpenter.kube import client as kc
from karpenter.kube.informers import Informer, Sink
from karpenter.kube.leader import LeaderElector
from karpenter.observability.logging import get_logger
from karpenter.observability.server import serve_http
from karpenter.state import heap
from karpenter.state.cluster import ClusterState

# The batcher key under which CapacityBuffer changes ask for a provisioning pass.
BUFFERS = "capacitybuffers"


def default_identity() -> str:
    """``<hostname>_<random>``, like client-go's leader-election identities."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def mirror_feeds(
    state: ClusterState, *, overlays: bool = False, buffers: bool = False
) -> list[tuple[kc.Resource, Sink]]:
    """Every resource the mirror holds and the store it lands in (``karpenter explain`` lists
    the same set once, the viewer watches it)."""
    feeds: list[tuple[kc.Resource, Sink]] = [
        (kc.NODEPOOLS, state.nodepools),
        (kc.NODES, state.nodes),
        (kc.NODECLAIMS, state.nodeclaims),
        (kc.DAEMONSETS, state.daemonsets),
        (kc.PODS, state.pods),
        (kc.PDBS, state.pdbs),
        (kc.PVCS, state.pvcs),
        (kc.PVS, state.pvs),
        (kc.STORAGECLASSES, state.storage_classes),
        (kc.CSINODES, state.csinodes),
        (kc.NAMESPACES, state.namespaces),
    ]
    if overlays:
        feeds.append((kc.NODEOVERLAYS, state.overlays))
    if buffers:
        feeds.append((kc.CAPACITYBUFFERS, state.capacity_buffers))
        feeds.append((kc.PODTEMPLATES, state.pod_templates))
    return feeds


def _informers(
    kube: kc.KubeClient,
    state: ClusterState,
    clock: Clock,
    extra: Sequence[tuple[kc.Resource, Sink]] = (),
    *,
    overlays: bool = False,
    buffers: bool = False,
) -> list[Informer]:
    """The mirror's informers, plus a provider's own (e.g. EC2NodeClasses)."""
    feeds = [*mirror_feeds(state, overlays=overlays, buffers=buffers), *extra]
    return [Informer(kube, resource, store, clock) for resource, store in feeds]


class Operator:
    """Everything ``karpenter run`` runs, wired together."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        services: Sequence[Service] = (),
        leader_services: Sequence[Service] = (),
        informers: Sequence[tuple[kc.Resource, Sink]] = (),
        identity: str = "",
        serve: bool = True,
        disruption_timing: tuple[float, float] = (DISRUPTION_POLL_S, DISRUPTION_VALIDATION_S),
    ) -> None:
        settings = ctx.settings
        self.ctx = ctx
        self.settings = settings
        self.cloud = ctx.cloud
        self.metrics = ctx.metrics
        self.state = ctx.state
        self.recorder = ctx.recorder
        self.services = tuple(services)
        # Provider controllers (interruption, NodeClass status, GC): only the leader acts.
        self.leader_services = tuple(leader_services)
        self.serve = serve
        gates = settings.feature_gates
        self.informers = _informers(
            ctx.kube,
            self.state,
            ctx.clock,
            informers,
            overlays=gates["NodeOverlay"],
            buffers=gates["CapacityBuffer"],
        )
        self.state.subscribe(self._observe_state)

        self._build_controllers(ctx, disruption_timing)
        self.identity = identity or default_identity()
        self.elector: LeaderElector | None = None
        if not settings.DISABLE_LEADER_ELECTION:
            self.elector = LeaderElector(
                ctx.kube,
                settings.leader_election_namespace,
                settings.LEADER_ELECTION_NAME,
                self.identity,
                clock=ctx.clock,
            )
        self.leading = False
        self.ports: tuple[int, int] | None = None
        self._log = get_logger("operator").bind(identity=self.identity)

    def _build_controllers(self, ctx: ControllerContext, timing: tuple[float, float]) -> None:
        """Every controller this operator runs, feature-gated ones included."""
        # Each reacts to the mirror on its own and none calls another; built in the order
        # they subscribe to the mirror.
        self.termination = Termination(ctx)
        self.node_termination = NodeTermination(ctx)
        self.lifecycle = Lifecycle(ctx)
        self.nodepool_status = NodePoolStatus(ctx)
        self.podevents = PodEvents(ctx)
        self.drift = DriftWatch(ctx)
        self.consolidatable = ConsolidatableWatch(ctx)
        self.consistency = Consistency(ctx)
        self.registration_health = RegistrationHealth(ctx)
        self.lifecycle.registration_health = self.registration_health
        self.disruption = Disruption(ctx, poll_s=timing[0], validation_s=timing[1])
        # status-condition counts: every replica, unless cluster-state observability is off
        self.condition_metrics = (
            None if ctx.settings.DISABLE_CLUSTER_STATE_OBSERVABILITY else ConditionMetrics(ctx)
        )
        # every replica exports what its mirror shows (upstream's metrics.* controllers)
        self.state_metrics = (
            None if ctx.settings.DISABLE_CLUSTER_STATE_OBSERVABILITY else StateMetrics(ctx)
        )
        # NodeRepair and StaticCapacity: feature gates, off by default as upstream
        self.node_health = NodeHealth(ctx) if ctx.settings.feature_gates["NodeRepair"] else None
        self.static_capacity = (
            StaticCapacity(ctx) if ctx.settings.feature_gates["StaticCapacity"] else None
        )
        self.nodeclaim_gc = NodeClaimGC(ctx)
        self.provisioner = Provisioner(
            ctx,
            batch_idle_s=ctx.settings.batch_idle_seconds,
            batch_max_s=ctx.settings.batch_max_seconds,
            default_spread=schedulerconfig.load(ctx.settings.SCHEDULER_CONFIG),
            early=ctx.settings.feature_gates["EarlyProvisioning"],
        )
        # CapacityBuffer (feature gate, off by default as upstream): headroom as virtual pods
        self.capacity_buffers: CapacityBuffers | None = None
        self.nominations: NominationPublisher | None = None
        if ctx.settings.feature_gates["PublishNominations"]:
            publisher = self.nominations = NominationPublisher(ctx)
            self.lifecycle.nominations = publisher
            self.provisioner.nominations = publisher  # it tells the publisher when to hold
        if ctx.settings.feature_gates["CapacityBuffer"]:
            provisioner = self.provisioner
            buffers = CapacityBuffers(ctx, on_change=lambda: provisioner.batcher.trigger(BUFFERS))
            self.capacity_buffers = buffers
            provisioner.after_pass = buffers.report
        # On the leader, in this order: the queue-driven controllers (each reports started),
        # then the polling loops.
        # (the buffers resolve before the provisioner starts: no pass without its headroom)
        self.queued: tuple[Service, ...] = tuple(
            c.run
            for c in (
                self.nodepool_status,
                self.termination,
                self.node_termination,
                self.lifecycle,
                self.capacity_buffers,
                self.provisioner,
                self.podevents,
                self.nominations,
            )
            if c is not None
        )
        self.loops: tuple[Callable[[], Coroutine[Any, Any, None]], ...] = tuple(
            c.run
            for c in (
                self.nodeclaim_gc,
                self.disruption,
                self.drift,
                self.consolidatable,
                self.consistency,
                self.registration_health,
                self.node_health,
                self.static_capacity,
            )
            if c is not None
        )

    def _observe_state(self, kind: str, key: str, obj: object) -> None:
        if kind in ("Node", "NodeClaim"):
            self.metrics.cluster_state_node_count.set(len(self.state.nodes.entries))
            self.metrics.cluster_state_synced.set(1 if self.state.synced() else 0)

    def ready(self) -> bool:
        """/readyz: every informer has listed once."""
        return all(i.synced.is_set() for i in self.informers)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run until cancelled; reports started once the mirror is synced."""
        async with anyio.create_task_group() as tg:
            if self.serve:
                s = self.settings
                self.ports = await tg.start(
                    serve_http,
                    self.metrics,
                    "0.0.0.0",
                    s.METRICS_PORT,
                    s.HEALTH_PROBE_PORT,
                    self.ready,
                )
            await tg.start(self.recorder.run)
            for service in self.services:
                await tg.start(service)
            for informer in self.informers:
                await tg.start(informer.run)
            if self.condition_metrics is not None:
                tg.start_soon(self.condition_metrics.run)
            self._log.info("cluster state synced")
            heap.settle()  # the listed mirror is out of every later full collection
            task_status.started()
            if self.elector is None:
                await self._lead()
            else:
                await self.elector.run(self._lead)

    async def _lead(self) -> None:
        self._log.info("leading: starting controllers")
        self.leading = True
        try:
            async with anyio.create_task_group() as tg:
                # The provider's leader services first: the simulated cloud's booter must be
                # up before the provisioner's first launch.
                for service in self.leader_services:
                    await tg.start(service)
                for queued in self.queued:
                    await tg.start(queued)
                for loop in self.loops:
                    tg.start_soon(loop)
        finally:
            self.leading = False


async def run_until_signalled(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main`` until it returns or SIGTERM/SIGINT arrives, then cancel it cleanly."""
    log = get_logger("operator")
    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("signal received, shutting down", signal=signal.Signals(signum).name)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch_signals)
        await main()
        tg.cancel_scope.cancel()
