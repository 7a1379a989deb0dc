"""``karpenter explain`` against a live cluster: list once, snapshot, ask the core, print.

No watch: every resource the controller's mirror holds is listed once into a fresh
``ClusterState`` (the same decoders), the snapshot is taken with the catalogue the caller
chose, and the pure verdicts of ``explain.pods`` / ``explain.nodes`` are rendered. Setup
failures (kubeconfig, unreachable apiserver, missing CRDs, no such pod or node) are raised as
``ExplainError`` with one line for the person at the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.pod import Pod
from karpenter.explain import nodes, pods, render
from karpenter.kube import client as kc
from karpenter.kube import errors, preflight
from karpenter.operator import mirror_feeds
from karpenter.state.cluster import ClusterState


class ExplainError(Exception):
    """One line naming why there is no answer."""


@dataclass(frozen=True, slots=True)
class Request:
    """What to explain and how: ``kind`` is ``pod`` or ``node``."""

    kind: str
    name: str
    catalogue: tuple[InstanceType, ...]
    options: Options
    now: float
    overlays: bool = False


async def load_state(kube: kc.KubeClient, *, overlays: bool = False) -> ClusterState:
    """The mirror, filled by one list of every resource it holds."""
    state = ClusterState()
    for resource, sink in mirror_feeds(state, overlays=overlays):
        objects, _ = await kube.list(resource)
        sink.replace(objects)
    return state


def catalogue_by_pool(
    state: ClusterState, catalogue: tuple[InstanceType, ...]
) -> Mapping[str, tuple[InstanceType, ...]]:
    """Every active NodePool offered the whole catalogue (the simulated cloud's and the aws
    preset's answer to ``instance_types``)."""
    return {p.name: catalogue for p in state.active_nodepools()}


def _snapshot(state: ClusterState, req: Request) -> Cluster:
    return state.snapshot(catalogue_by_pool(state, req.catalogue))


def answer(state: ClusterState, req: Request) -> render.JSON:
    """The verdict document for ``req`` on the listed state."""
    cluster = _snapshot(state, req)
    if req.kind == "pod":
        key = req.name if "/" in req.name else f"default/{req.name}"
        pending: list[Pod] = state.provisionable_pods()
        try:
            return render.pod_json(pods.explain_pod(cluster, key, pending, req.options))
        except pods.UnknownPod:
            raise ExplainError(f"pod {key} not found") from None
    try:
        return render.node_json(nodes.explain_node(cluster, req.name, req.options, req.now))
    except nodes.UnknownNode:
        raise ExplainError(
            f"node {req.name} not found (no Node or NodeClaim of that name)"
        ) from None


async def explain(kubeconfig: Path | None, req: Request) -> render.JSON:
    """Connect, check, list once, answer."""
    try:
        async with kc.connect(kubeconfig) as kube:
            await preflight.check(kube)
            state = await load_state(kube, overlays=req.overlays)
    except errors.ClientSetupError as err:
        raise ExplainError(str(err)) from None
    except errors.ApiError as err:
        raise ExplainError(f"listing the cluster failed: {err}") from None
    return answer(state, req)
