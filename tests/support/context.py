"""Builders for the operator's host and the controller context: real parts, defaults + overrides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from karpenter.cloud.plugin import Host, Plugin
from karpenter.controllers.context import ControllerContext
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.kube.events import EventRecorder
from karpenter.observability.metrics import Metrics
from karpenter.providers.simulated.cloud import SimulatedCloud
from karpenter.settings import Settings
from karpenter.state.cluster import ClusterState

if TYPE_CHECKING:
    from karpenter.aio.clock import Clock
    from karpenter.cloud.provider import CloudProvider
    from karpenter.core.model.cluster import Options
    from karpenter.kube.client import KubeClient


def host(
    kube: KubeClient,
    clock: Clock,
    *,
    settings: Settings | None = None,
    state: ClusterState | None = None,
    metrics: Metrics | None = None,
) -> Host:
    """A host on ``kube``: a fresh mirror, recorder and metrics, settings from the environment."""
    return Host(
        kube,
        state if state is not None else ClusterState(),
        EventRecorder(kube, clock),
        clock,
        metrics if metrics is not None else Metrics(),
        settings if settings is not None else Settings(),
    )


def controller_context(
    kube: KubeClient,
    clock: Clock,
    *,
    cloud: CloudProvider | None = None,
    options: Options | None = None,
    settings: Settings | None = None,
    state: ClusterState | None = None,
    metrics: Metrics | None = None,
) -> ControllerContext:
    """A context on ``kube`` with the simulated cloud (8 fake types) unless ``cloud`` is given."""
    base = host(kube, clock, settings=settings, state=state, metrics=metrics)
    plugin = Plugin(
        cloud if cloud is not None else SimulatedCloud(kube, fake_instance_types(8), clock),
        options if options is not None else base.settings.core_options(),
    )
    return ControllerContext.of(base, plugin)
