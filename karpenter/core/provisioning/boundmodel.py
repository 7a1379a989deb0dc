"""The lower bound's relaxed model: the (pool, type)s each pod may use, at their prices.

Each pod may use any (NodePool, instance type) its tolerations, required node affinity (any
term) and volume topology allow, at the cheapest offering the pool allows, with the type's
allocatable net of the DaemonSets it attracts; preferences and PreferNoSchedule taints are
relaxed. Pods of equal size and options form a group; sizes and capacities are scaled per
resource (by the largest capacity) so that the programs built on them are well conditioned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import PassContext
from karpenter.core.provisioning.targets import Template
from karpenter.core.provisioning.volumes import VolumeError
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms
from karpenter.core.scheduling.taints import untolerated


@dataclass(frozen=True, slots=True)
class NodeType:
    """A (pool, instance type) a new node may be."""

    template: int
    index: int
    price: float
    capacity: tuple[float, ...]  # scaled per resource
    zones: dict[str, float]  # zone -> cheapest price there


@dataclass(slots=True)
class Model:
    """Resources (with their scale), the types pods may use, and the pod groups: (scaled
    size, allowed types by index, members)."""

    names: list[str]
    scale: list[float]
    types: list[NodeType] = field(default_factory=list)
    type_of: dict[tuple[int, int], int] = field(default_factory=dict)
    groups: list[tuple[tuple[float, ...], tuple[int, ...], list[Pod]]] = field(default_factory=list)


def _alternatives(ctx: PassContext, pod: Pod) -> list[Requirements]:
    base = Requirements.from_labels(pod.node_selector)
    terms = [from_selector_terms(t) for t in pod.required_node_terms] or [Requirements()]
    try:
        volumes = ctx.volumes.resolve(pod).alternatives
    except VolumeError:
        volumes = (Requirements(),)
    return [base.intersect(t).intersect(v) for t in terms for v in volumes]


def _mask(t: Template, pod: Pod, alternatives: Sequence[Requirements]) -> int:
    """Types of ``t`` the pod may run on (preferences and PreferNoSchedule taints relaxed)."""
    if untolerated(t.taints, pod.tolerations, include_prefer=False):
        return 0
    mask = 0
    for alt in alternatives:
        if t.requirements.compatible(alt, t.well_known):
            mask |= t.catalog.compatible(t.requirements.intersect(alt))
    return mask & t.base_mask & t.fit_mask(pod.requests, pod.host_ports)


def build(ctx: PassContext, pods: Sequence[Pod]) -> Model | None:
    names = sorted({n for p in pods for n in p.requests} | {res.PODS})
    options: dict[tuple[tuple[int, ...], tuple[tuple[int, int], ...]], list[Pod]] = {}
    for pod in pods:
        alternatives = _alternatives(ctx, pod)
        allowed = tuple(
            (t.index, i)
            for t in ctx.templates
            for i in t.catalog.indices(_mask(t, pod, alternatives))
        )
        if not allowed:
            return None  # a pod the relaxation cannot place: no bound worth reporting
        size = tuple(pod.requests.get(n, 0) for n in names)
        options.setdefault((size, allowed), []).append(pod)
    model = Model(names, [1.0] * len(names))
    for _, allowed in options:
        for key in allowed:
            if key not in model.type_of:
                model.type_of[key] = -1
    raw = {key: _type(ctx.templates[key[0]], key[1], names) for key in model.type_of}
    for r in range(len(names)):
        model.scale[r] = max((cap[r] for _, cap, _ in raw.values()), default=1) or 1
    for key, (price, cap, zones) in raw.items():
        model.type_of[key] = len(model.types)
        scaled = tuple(c / s for c, s in zip(cap, model.scale, strict=True))
        model.types.append(NodeType(key[0], key[1], price, scaled, zones))
    for (size, allowed), members in options.items():
        scaled = tuple(v / s for v, s in zip(size, model.scale, strict=True))
        model.groups.append((scaled, tuple(model.type_of[k] for k in allowed), members))
    return model


def _type(
    t: Template, index: int, names: Sequence[str]
) -> tuple[float, list[int], dict[str, float]]:
    zone_req = t.requirements.get_or_exists(lbl.ZONE)
    ctype = t.requirements.get_or_exists(lbl.CAPACITY_TYPE)
    zones: dict[str, float] = {}
    for o in t.catalog.types[index].offerings:
        if o.available and zone_req.has(o.zone) and ctype.has(o.capacity_type):
            zones[o.zone] = min(zones.get(o.zone, math.inf), o.price)
    overhead = next((g.overhead for g in t.daemon_groups if g.mask >> index & 1), {})
    alloc = t.catalog.allocatable[index]
    capacity = [max(alloc.get(n, 0) - overhead.get(n, 0), 0) for n in names]
    return min(zones.values(), default=math.inf), capacity, zones
