"""The simulated provider as ``karpenter run`` and ``karpenter sandbox`` start it.

The smallest complete provider: ``from_flags`` reads its flags (``--catalog``,
``--boot-delay``), ``startup`` has nothing to look up, and ``open`` builds the cloud on the
operator's host and yields it with the one service it needs (the task group that boots Nodes).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from karpenter.aio.clock import Clock
from karpenter.aio.ratelimit import TokenBucket
from karpenter.cloud.plugin import Host, Plugin
from karpenter.core.model.instancetype import InstanceType
from karpenter.kube.client import KubeClient
from karpenter.providers.simulated.catalog import parse_catalog
from karpenter.providers.simulated.cloud import SimulatedCloud


def machines_client(kube: KubeClient, clock: Clock) -> KubeClient:
    """The simulated machines' own client: the controller's session and credentials, but its
    own request throttle (the same QPS and burst) and in-flight slots.

    The simulated cloud does with the apiserver what is not the controller's in a real
    cluster: a kubelet creates its Node, a node agent removes startup taints, the cloud's own
    database holds the instances (here ConfigMaps). Sharing the controller's KUBE_CLIENT_QPS
    spent about three writes per launch of its budget (measured on kwok: 181 launches in a
    burst took 10 s from launch to registration, the controller's own writes queued behind the
    machines'), which no real cluster charges to Karpenter."""
    limiter = kube.limiter
    if limiter is None:
        return kube
    own = TokenBucket(clock, limiter.rate, limiter.burst)
    return KubeClient(kube.http, kube.creds, own, kube.max_in_flight)


@dataclass(frozen=True, slots=True)
class SimulatedProvider:
    """The simulated cloud's configuration: what it sells, and how long a Node takes to boot."""

    catalog: tuple[InstanceType, ...]
    boot_delay_s: float = 0.0
    # when the node agent removes startup taints after a Node is Ready; None: never
    startup_agent_delay_s: float | None = 1.0

    @classmethod
    def from_flags(cls, flags: argparse.Namespace) -> SimulatedProvider:
        """``--catalog``, ``--boot-delay`` and ``--startup-taint-delay`` (negative: never)
        (ProviderConfigError on a bad catalog)."""
        agent = getattr(flags, "startup_taint_delay", 1.0)
        return cls(parse_catalog(flags.catalog), flags.boot_delay, agent if agent >= 0 else None)

    def startup(self) -> SimulatedProvider:
        """Nothing to look up before the process starts."""
        return self

    @contextlib.asynccontextmanager
    async def open(self, host: Host) -> AsyncIterator[Plugin]:
        """The simulated cloud on ``host``'s apiserver, with its node-booting service."""
        cloud = SimulatedCloud(
            machines_client(host.kube, host.clock),
            self.catalog,
            host.clock,
            boot_delay_s=self.boot_delay_s,
            startup_agent_delay_s=self.startup_agent_delay_s,
        )
        # Its instances live in the cluster: only the leader boots, reconciles and collects them
        # (a standby writing there would act beside the leader).
        yield Plugin(cloud, host.settings.core_options(), leader_services=(cloud.run,))
