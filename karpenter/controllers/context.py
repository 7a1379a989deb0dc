"""The controller context: the parts every controller shares, built once by the composition root.

Controllers take one ``ControllerContext`` instead of repeating the same constructor list
(kube client, mirror, cloud, recorder, clock, metrics, settings, core options); what is
particular to one controller (timeouts, concurrency, poll intervals) stays a keyword argument
of that controller. ``metered`` gives each controller its own cloud wrapper, so the
``controller`` label of the cloudprovider metrics says who called. Controllers share state
through this context, the mirror and the core, never by importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from karpenter.aio.clock import Clock
from karpenter.cloud.metered import MeteredCloud
from karpenter.cloud.plugin import Host, NodeClassGeneration, Plugin, no_node_classes
from karpenter.cloud.provider import CloudProvider
from karpenter.core.model.cluster import Options
from karpenter.kube.client import KubeClient
from karpenter.kube.events import EventRecorder
from karpenter.observability.metrics import Metrics
from karpenter.settings import Settings
from karpenter.state.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class ControllerContext:
    """What every controller reads; immutable, so no controller can rewire another."""

    kube: KubeClient
    state: ClusterState
    cloud: CloudProvider
    recorder: EventRecorder
    clock: Clock
    metrics: Metrics
    settings: Settings
    options: Options
    node_class_generation: NodeClassGeneration = no_node_classes

    @classmethod
    def of(cls, host: Host, plugin: Plugin) -> ControllerContext:
        """The context of a cluster side and the provider opened on it."""
        return cls(
            host.kube,
            host.state,
            plugin.cloud,
            host.recorder,
            host.clock,
            host.metrics,
            host.settings,
            plugin.options,
            plugin.node_class_generation,
        )

    def metered(self, controller: str) -> CloudProvider:
        """The cloud as ``controller`` sees it: every call timed and its errors counted."""
        return MeteredCloud(self.cloud, self.metrics, controller)


class Controller:
    """Base of the controllers: binds the context's parts under the names controllers use.

    ``cloud`` is the context's cloud metered under the controller's ``name``, which is also
    the ``controller`` key of its structured logs.
    """

    def __init__(self, ctx: ControllerContext, name: str) -> None:
        self.ctx = ctx
        self.name = name
        self.kube = ctx.kube
        self.state = ctx.state
        self.cloud = ctx.metered(name)
        self.recorder = ctx.recorder
        self.clock = ctx.clock
        self.metrics = ctx.metrics
        self.options = ctx.options
        self._log = structlog.get_logger().bind(controller=name)
