"""The operator: the composition root of ``karpenter run``, owner of the one top task group.

It builds everything by constructor injection (no globals): the cluster mirror and the
informers feeding it, the event recorder, the controllers, the metrics/health server and the
leader elector. Informers and the HTTP server run on every replica, so a standby has a warm
mirror and answers probes; the controllers run only while this replica holds the leader
Lease (``LeaderElector`` cancels them when it is lost). ``run_until_signalled`` turns SIGTERM
or SIGINT into a cancellation of that task group, so every task unwinds through its
``finally`` blocks (the Lease is released, sockets closed) before the process exits.
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
from karpenter.cloud.metered import MeteredCloud
from karpenter.cloud.provider import CloudProvider
from karpenter.controllers.disruption import POLL_S as DISRUPTION_POLL_S
from karpenter.controllers.disruption import VALIDATION_S as DISRUPTION_VALIDATION_S
from karpenter.controllers.disruption import Disruption
from karpenter.controllers.drift import DriftWatch
from karpenter.controllers.lifecycle import Lifecycle
from karpenter.controllers.node_health import NodeHealth
from karpenter.controllers.node_termination import NodeTermination
from karpenter.controllers.nodeclaim_gc import NodeClaimGC
from karpenter.controllers.nodepool import NodePoolStatus
from karpenter.controllers.podevents import PodEvents
from karpenter.controllers.provisioner import Provisioner
from karpenter.controllers.state_metrics import StateMetrics
from karpenter.controllers.static_capacity import StaticCapacity
from karpenter.controllers.termination import Termination
from karpenter.core.model.cluster import Options
from karpenter.kube import client as kc
from karpenter.kube.events import EventRecorder
from karpenter.kube.informers import Informer, Sink
from karpenter.kube.leader import LeaderElector
from karpenter.observability.logging import get_logger
from karpenter.observability.metrics import Metrics
from karpenter.observability.server import serve_http
from karpenter.settings import Settings
from karpenter.state.cluster import ClusterState

# A background service the operator runs beside the controllers (e.g. the simulated cloud).
Service = Callable[..., Coroutine[Any, Any, None]]


def default_identity() -> str:
    """``<hostname>_<random>``, like client-go's leader-election identities."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _informers(
    kube: kc.KubeClient,
    state: ClusterState,
    clock: Clock,
    extra: Sequence[tuple[kc.Resource, Sink]] = (),
    *,
    overlays: bool = False,
) -> list[Informer]:
    """The mirror's informers, plus a provider's own (e.g. EC2NodeClasses)."""
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
        *extra,
    ]
    if overlays:
        feeds.append((kc.NODEOVERLAYS, state.overlays))
    return [Informer(kube, resource, store, clock) for resource, store in feeds]


class Operator:
    """Everything ``karpenter run`` runs, wired together."""

    def __init__(
        self,
        kube: kc.KubeClient,
        settings: Settings,
        cloud: CloudProvider,
        clock: Clock,
        metrics: Metrics,
        *,
        services: Sequence[Service] = (),
        leader_services: Sequence[Service] = (),
        informers: Sequence[tuple[kc.Resource, Sink]] = (),
        state: ClusterState | None = None,
        identity: str = "",
        serve: bool = True,
        disruption_timing: tuple[float, float] = (DISRUPTION_POLL_S, DISRUPTION_VALIDATION_S),
        options: Options | None = None,
    ) -> None:
        self.settings = settings
        self.cloud = cloud
        self.metrics = metrics
        self.services = tuple(services)
        # Provider controllers (interruption, NodeClass status, GC): only the leader acts.
        self.leader_services = tuple(leader_services)
        self.serve = serve
        self.state = state if state is not None else ClusterState()
        self.recorder = EventRecorder(kube, clock)
        self.informers = _informers(
            kube,
            self.state,
            clock,
            informers,
            overlays=settings.feature_gates["NodeOverlay"],
        )
        self.state.subscribe(self._observe_state)

        def metered(controller: str) -> MeteredCloud:
            return MeteredCloud(cloud, metrics, controller)

        self.termination = Termination(
            kube, self.state, metered("nodeclaim.termination"), self.recorder, clock, metrics
        )
        self.node_termination = NodeTermination(
            kube, self.state, metered("node.termination"), self.recorder, clock, metrics
        )
        self.lifecycle = Lifecycle(
            kube, self.state, metered("nodeclaim.lifecycle"), self.recorder, clock, metrics
        )
        self.nodepool_status = NodePoolStatus(kube, self.state, clock)
        self.podevents = PodEvents(kube, self.state, clock)
        self.drift = DriftWatch(kube, self.state, metered("nodeclaim.disruption"), clock)
        self.disruption = Disruption(
            kube,
            self.state,
            metered("disruption"),
            self.recorder,
            clock,
            options or settings.core_options(),  # a provider adds its own labels
            metrics,
            poll_s=disruption_timing[0],
            validation_s=disruption_timing[1],
        )
        # every replica exports what its mirror shows (upstream's metrics.* controllers)
        self.state_metrics = (
            None
            if settings.DISABLE_CLUSTER_STATE_OBSERVABILITY
            else StateMetrics(self.state, metrics)
        )
        # NodeRepair (feature gate, off by default as upstream): replace unhealthy nodes
        self.node_health = (
            NodeHealth(kube, self.state, metered("node.health"), self.recorder, clock, metrics)
            if settings.feature_gates["NodeRepair"]
            else None
        )
        # StaticCapacity (feature gate, off by default as upstream): NodePools with replicas
        self.static_capacity = (
            StaticCapacity(kube, self.state, clock, metrics)
            if settings.feature_gates["StaticCapacity"]
            else None
        )
        self.nodeclaim_gc = NodeClaimGC(
            kube, self.state, metered("nodeclaim.garbagecollection"), clock, metrics
        )
        self.provisioner = Provisioner(
            kube,
            self.state,
            metered("provisioner"),
            self.recorder,
            clock,
            options or settings.core_options(),  # a provider adds its own labels
            metrics,
            batch_idle_s=settings.batch_idle_seconds,
            batch_max_s=settings.batch_max_seconds,
            default_spread=schedulerconfig.load(settings.SCHEDULER_CONFIG),
        )
        self.identity = identity or default_identity()
        self.elector: LeaderElector | None = None
        if not settings.DISABLE_LEADER_ELECTION:
            self.elector = LeaderElector(
                kube,
                settings.leader_election_namespace,
                settings.LEADER_ELECTION_NAME,
                self.identity,
                clock=clock,
            )
        self.leading = False
        self.ports: tuple[int, int] | None = None
        self._log = get_logger("operator").bind(identity=self.identity)

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
            self._log.info("cluster state synced")
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
                await tg.start(self.nodepool_status.run)
                await tg.start(self.termination.run)
                await tg.start(self.node_termination.run)
                await tg.start(self.lifecycle.run)
                await tg.start(self.provisioner.run)
                await tg.start(self.podevents.run)
                tg.start_soon(self.nodeclaim_gc.run)
                tg.start_soon(self.disruption.run)
                tg.start_soon(self.drift.run)
                if self.node_health is not None:
                    tg.start_soon(self.node_health.run)
                if self.static_capacity is not None:
                    tg.start_soon(self.static_capacity.run)
                for service in self.leader_services:
                    await tg.start(service)
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
