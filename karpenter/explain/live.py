"""``karpenter explain`` against a live cluster: list once, snapshot, ask the core, print.

No watch: the cloud provider chosen by name (``providers.registry``) is opened on a host as the
controller opens it (its services are not run), every resource the controller's mirror holds,
and the provider's own kinds, are listed once into a fresh ``ClusterState`` (the same
decoders), each NodePool gets the instance types the provisioner would get
(``controllers.launching.instance_types``: the provider's, with NodeOverlays), CapacityBuffers
(behind their gate) are resolved into virtual pods read-only, and the pure
verdicts of ``explain.pods`` / ``explain.nodes`` are rendered. Setup failures (kubeconfig,
unreachable apiserver, missing CRDs, no such pod or node) are raised as ``ExplainError`` with
one line for the person at the terminal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import structlog

from karpenter.aio.clock import Clock
from karpenter.cloud.plugin import Host, Plugin
from karpenter.controllers import capacity_buffers
from karpenter.controllers.launching import instance_types
from karpenter.controllers.provisioner import EARLY_AFTER_S, EARLY_UNTIL_S
from karpenter.core import buffers
from karpenter.core.model.cluster import Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.explain import nodes, pods, render
from karpenter.kube import client as kc
from karpenter.kube import codec, errors, preflight
from karpenter.kube.events import EventRecorder
from karpenter.observability.metrics import Metrics
from karpenter.operator import mirror_feeds
from karpenter.providers import registry
from karpenter.settings import Settings
from karpenter.state.cluster import ClusterState, awaits_scheduler

Types = Mapping[str, tuple[InstanceType, ...]]


class ExplainError(Exception):
    """One line naming why there is no answer."""


@dataclass(frozen=True, slots=True)
class Request:
    """What to explain: ``kind`` is ``pod`` or ``node``."""

    kind: str
    name: str


@asynccontextmanager
async def opened(
    kubeconfig: Path | None, provider: registry.Provider, settings: Settings, clock: Clock
) -> AsyncIterator[tuple[kc.KubeClient, Host, Plugin]]:
    """A checked connection, the host and the provider opened on it (services not started)."""
    async with kc.connect(kubeconfig) as kube:
        await preflight.check(kube)
        host = Host(kube, ClusterState(), EventRecorder(kube, clock), clock, Metrics(), settings)
        async with provider.open(host) as plugin:
            await preflight.check(kube, [resource for resource, _ in plugin.informers])
            yield kube, host, plugin


async def pool_types(
    plugin: Plugin, state: ClusterState, now: float
) -> dict[str, tuple[InstanceType, ...]]:
    """Each active NodePool's instance types, as the provisioner's pass gets them."""
    log = structlog.get_logger().bind(tool="explain")
    pools = state.active_nodepools()
    return await instance_types(plugin.cloud, state, pools, now, plugin.options, log)


def early_keys(state: ClusterState, now: float) -> frozenset[str]:
    """Pods the controller provisions early (EarlyProvisioning): it times a pod from when it
    first saw it; a one-shot listing has only the creation time, which is as early or earlier."""
    return frozenset(
        p.key
        for p in state.pods.unordered()
        if awaits_scheduler(p) and EARLY_AFTER_S <= now - p.creation <= EARLY_UNTIL_S
    )


def answer(
    state: ClusterState,
    types: Types,
    options: Options,
    req: Request,
    now: float,
    *,
    early: bool = False,
) -> render.JSON:
    """The verdict document for ``req`` on the listed state (``early``: the EarlyProvisioning
    gate is on)."""
    cluster = state.snapshot(types)
    if req.kind == "pod":
        key = req.name if "/" in req.name else f"default/{req.name}"
        provisionable = state.provisionable_pods(early_keys(state, now) if early else frozenset())
        try:
            verdict = pods.explain_pod(cluster, key, provisionable, options)
        except pods.UnknownPod:
            raise ExplainError(f"pod {key} not found") from None
        return render.pod_json(verdict)
    try:
        return render.node_json(nodes.explain_node(cluster, req.name, options, now))
    except nodes.UnknownNode:
        why = f"node {req.name} not found (no Node or NodeClaim of that name)"
        raise ExplainError(why) from None


async def _resolve_buffers(kube: kc.KubeClient, state: ClusterState) -> None:
    """Every listed buffer's virtual pods, resolved as the buffer controller resolves them (no
    status written): the verdicts then count the headroom the controller keeps."""
    for key, entry in sorted(state.capacity_buffers.entries.items()):
        raw = state.capacity_buffers.raw(key)
        if entry.value is None or raw is None or codec.meta(raw).get("deletionTimestamp"):
            continue
        resolution = await capacity_buffers.resolve(kube, state, entry.value)
        if resolution.buffer is not None:
            state.virtual_pods.set(key, buffers.virtual_pods(resolution.buffer))


async def explain(
    kubeconfig: Path | None,
    provider: registry.Provider,
    settings: Settings,
    clock: Clock,
    req: Request,
) -> render.JSON:
    """Connect, check, open the provider, list once, answer."""
    gates = settings.feature_gates
    feeds = {"overlays": gates["NodeOverlay"], "buffers": gates["CapacityBuffer"]}
    try:
        async with opened(kubeconfig, provider, settings, clock) as (kube, host, plugin):
            state = host.state
            for resource, sink in [*mirror_feeds(state, **feeds), *plugin.informers]:
                objects, _ = await kube.list(resource)
                sink.replace(objects)
            await _resolve_buffers(kube, state)
            now = clock.now()
            types = await pool_types(plugin, state, now)
            options = plugin.options
    except errors.ClientSetupError as err:
        raise ExplainError(str(err)) from None
    except errors.ApiError as err:
        raise ExplainError(f"listing the cluster failed: {err}") from None
    except (aiohttp.ClientError, OSError) as err:
        raise ExplainError(f"the apiserver went away: {err}") from None
    return answer(state, types, options, req, now, early=gates["EarlyProvisioning"])
