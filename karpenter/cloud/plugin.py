"""The provider plug: what the operator offers a cloud provider, and what the provider gives back.

A provider is opened on a ``Host`` (the cluster side the composition root built once: kube
client, mirror, event recorder, clock, metrics, settings) and yields a ``Plugin``: its
CloudProvider (the port the controllers call), the core options it adds (e.g. AWS's
reservation labels), the informers feeding its own kinds into stores it owns, and the services
it runs beside the controllers (on every replica, or only on the Lease holder). The operator
knows nothing else about a provider; ``providers.registry`` names them.

Errors: ``ProviderConfigError`` is bad provider input (one line, exit 2 before anything
starts); ``ProviderStartupError`` is a provider that cannot start (missing region, unreachable
API: one line, exit 1).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter.aio.clock import Clock
from karpenter.cloud.provider import CloudProvider
from karpenter.core.model.cluster import Options
from karpenter.core.model.node import NodeClassRef
from karpenter.kube.client import KubeClient, Resource
from karpenter.kube.events import EventRecorder
from karpenter.kube.informers import Sink
from karpenter.observability.metrics import Metrics
from karpenter.settings import Settings
from karpenter.state.cluster import ClusterState

# A background coroutine run inside the operator's task group (``run(task_status=...)``).
Service = Callable[..., Coroutine[Any, Any, None]]
# The generation of the NodeClass a NodePool references, as the provider's own mirror of its
# NodeClass kind has it; None when the provider has no such kind (the simulated cloud) or the
# object is not there. (Upstream asks the cloud provider's GetSupportedNodeClasses.)
NodeClassGeneration = Callable[[NodeClassRef], "int | None"]


def no_node_classes(ref: NodeClassRef) -> int | None:
    """A provider without NodeClass objects."""
    del ref
    return None


class ProviderConfigError(ValueError):
    """The provider's flags or settings are invalid; the message names the one at fault."""


class ProviderStartupError(Exception):
    """The provider cannot start; the message names the setting or the failing call."""


@dataclass(frozen=True, slots=True)
class Host:
    """The cluster side a provider is opened on, built once by the composition root."""

    kube: KubeClient
    state: ClusterState
    recorder: EventRecorder
    clock: Clock
    metrics: Metrics
    settings: Settings


@dataclass(frozen=True, slots=True)
class Plugin:
    """What an opened provider hands the operator."""

    cloud: CloudProvider
    options: Options  # the core's options, with whatever the provider adds
    informers: Sequence[tuple[Resource, Sink]] = ()  # the provider's own kinds
    services: Sequence[Service] = ()  # run on every replica (nothing that writes to the cluster)
    leader_services: Sequence[Service] = ()  # only while leading (controllers, the node booter)
    node_class_generation: NodeClassGeneration = no_node_classes
