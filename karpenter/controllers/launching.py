"""Launching capacity a pass decided: the instance types a pass sees, and NodeClaim creation.

Shared by the controllers that buy capacity (the provisioner for pending pods, the disruption
queue for replacements), so neither imports the other: each controller module stays
independent (an import-linter contract), and shared steps live in modules like this one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from karpenter.cloud.provider import CloudProvider, CloudProviderError
from karpenter.core.model.cluster import Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.nodepool import NodePool
from karpenter.core.provisioning import overlays as overlay_types
from karpenter.core.provisioning.results import NewNodeClaim
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS, KubeClient
from karpenter.observability.metrics import Metrics
from karpenter.state.cluster import ClusterState


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
        # the plan's cheapest type, when the launch was hedged against the scheduler's mixing
        **({"hedged_from": claim.hedged_from} if claim.hedged_from else {}),
    )
    return name
