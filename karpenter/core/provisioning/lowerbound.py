"""A lower bound on the hourly price of a pass's new NodeClaims that no valid fleet beats.

The bound relaxes, never tightens. Each pod may use any (NodePool, instance type) its
tolerations, required node affinity (any term) and volume topology allow, at the cheapest
offering the pool allows, with the type's allocatable net of the DaemonSets it attracts.

1. *Fluid*: an LP where pods split freely across fractional nodes (every resource of a node
   bounded by its capacity). Its dual gives each pod a price ``u`` that no node can exceed in
   total: a node of type t holding pods P costs at least Σ_P u.
2. *Zones*: some pods are forced into a zone. Required DoNotSchedule zone spreads whose pods on
   new capacity all own them fix, per zone, a minimum count (the skew invariant: every zone
   that receives a pod ends within ``maxSkew`` of the emptiest eligible zone); a pod allowed in
   one zone only is forced there. A zone's nodes must cover its forced pods: an integer
   program over whole nodes with the zone's types and prices, capacities summed per resource,
   bounds that zone's price from below (HiGHS' proven bound). Combined with the fluid prices,
   each zone costs at least max(its integer bound, the fluid price of its pods), and the pods
   not forced anywhere are charged at fluid prices beyond the zones' integer slack.

The result is the larger of the two, scaled down by a part per million for solver tolerances.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.pod import DO_NOT_SCHEDULE, Pod
from karpenter.core.provisioning import lp
from karpenter.core.provisioning.build import PassContext
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.results import NewNodeClaim
from karpenter.core.provisioning.targets import Template
from karpenter.core.provisioning.topology import SPREAD, Group, Topology
from karpenter.core.provisioning.volumes import VolumeError
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms
from karpenter.core.scheduling.taints import untolerated

TOLERANCE = 1e-6
ZONE_NODES = 200  # branch-and-bound nodes per zone program (its proven bound is kept)


@dataclass(frozen=True, slots=True)
class Cost:
    """A fleet's hourly price, a bound no valid fleet beats, and their ratio (None: no bound
    above zero for a positive price)."""

    per_hour: float
    lower_bound_per_hour: float
    ratio: float | None


def cost(price: float, bound: float | None) -> Cost:
    """The cost figures of a pass (the bound is rounded down to a micro-dollar: still a bound)."""
    floor = math.floor((bound or 0.0) * 1e6) / 1e6
    if price <= 0 and floor <= 0:
        ratio: float | None = 1.0
    elif floor > 0:
        ratio = round(price / floor, 4)
    else:
        ratio = None
    return Cost(round(price, 6), floor, ratio)


@dataclass(frozen=True, slots=True)
class _Type:
    """A (pool, instance type) a new node may be."""

    template: int
    index: int
    price: float
    capacity: tuple[float, ...]  # scaled per resource
    zones: dict[str, float]  # zone -> cheapest price there


@dataclass(slots=True)
class _Model:
    names: list[str]
    scale: list[float]
    types: list[_Type] = field(default_factory=list)
    type_of: dict[tuple[int, int], int] = field(default_factory=dict)
    groups: list[tuple[tuple[float, ...], tuple[int, ...], list[Pod]]] = field(default_factory=list)


def compute(ctx: PassContext, claims: Sequence[NewNodeClaim]) -> float:
    """A price (USD/hour) no valid set of new claims for the pods of ``claims`` undercuts."""
    pods = [p for c in claims for p in c.pods]
    if not pods:
        return 0.0
    model = _model(ctx, pods)
    if model is None:
        return 0.0
    fluid, value = _fluid(model)
    if fluid is None:
        return 0.0
    bounds = (
        fluid,
        _zones(ctx, model, claims, value),
        _whole_nodes(model),
        max(_alone(model, size, allowed) for size, allowed, _ in model.groups),
    )
    return max(bounds) * (1 - TOLERANCE)


# ---- the pods' options ---------------------------------------------------------------------
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


def _model(ctx: PassContext, pods: Sequence[Pod]) -> _Model | None:
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
    model = _Model(names, [1.0] * len(names))
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
        model.types.append(_Type(key[0], key[1], price, scaled, zones))
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


# ---- the fluid LP --------------------------------------------------------------------------
def _fluid(model: _Model) -> tuple[float | None, list[float]]:
    """The fluid optimum and each group's per-pod price (its dual)."""
    groups = len(model.groups)
    resources = len(model.names)
    rows = groups + resources * len(model.types)
    lower = [float(len(m)) for _, _, m in model.groups] + [-lp.INF] * (rows - groups)
    upper = [float(len(m)) for _, _, m in model.groups] + [0.0] * (rows - groups)
    program = lp.Model(lower, upper)
    for j, t in enumerate(model.types):
        if math.isinf(t.price):
            continue
        program.add_column(
            t.price, [(groups + j * resources + r, -c) for r, c in enumerate(t.capacity)]
        )
    for g, (size, allowed, _) in enumerate(model.groups):
        for j in allowed:
            if math.isinf(model.types[j].price):
                continue
            entries = [(g, 1.0)]
            entries += [(groups + j * resources + r, s) for r, s in enumerate(size) if s]
            program.add_column(0.0, entries)
    solution = lp.solve(program)
    if not solution.ok:
        return None, []
    return solution.objective, [max(d, 0.0) for d in solution.duals[:groups]]


# ---- whole nodes ---------------------------------------------------------------------------
def _alone(model: _Model, size: Sequence[float], allowed: Sequence[int]) -> float:
    """Some node holds this pod: at least the cheapest allowed type that fits it alone."""
    return min(
        (
            model.types[j].price
            for j in allowed
            if all(s <= c for s, c in zip(size, model.types[j].capacity, strict=True))
        ),
        default=0.0,
    )


def _whole_nodes(model: _Model) -> float:
    """Whole nodes of any zone whose summed capacity covers every pod (proven bound)."""
    need = [
        sum(size[r] * len(members) for size, _, members in model.groups)
        for r in range(len(model.names))
    ]
    types = [
        _Type(t.template, t.index, t.price, t.capacity, {"": t.price})
        for t in model.types
        if math.isfinite(t.price)
    ]
    return _integer_cover(types, "", need)


# ---- zones ---------------------------------------------------------------------------------
Demand = list[tuple[float, tuple[float, ...]]]  # (fluid price, scaled size) per forced pod


def _zones(
    ctx: PassContext, model: _Model, claims: Sequence[NewNodeClaim], value: Sequence[float]
) -> float:
    """Σ over zones of max(integer bound of its forced pods, their fluid price), plus the
    fluid price of every other pod beyond the zones' integer slack."""
    forced = _forced(ctx, model, claims, value)
    total = sum(value[g] * len(m) for g, (_, _, m) in enumerate(model.groups))
    bound = slack = forced_value = 0.0
    for zone, demand in sorted(forced.items()):
        pods_value = sum(v for v, _ in demand)
        need = [sum(s[r] for _, s in demand) for r in range(len(model.names))]
        whole = _zone_program(model, zone, need)
        bound += max(whole, pods_value)
        slack += max(0.0, whole - pods_value)
        forced_value += pods_value
    return bound + max(0.0, total - forced_value - slack)


def _forced(
    ctx: PassContext, model: _Model, claims: Sequence[NewNodeClaim], value: Sequence[float]
) -> dict[str, Demand]:
    """Per zone, the pods (or smallest-pod stand-ins) every valid fleet puts there."""
    zone_of = {id(p): _single_zone(c.requirements) for c in claims for p in c.pods}
    info = {
        id(p): (value[g], size)
        for g, (size, _, members) in enumerate(model.groups)
        for p in members
    }
    out: dict[str, Demand] = {}
    used: set[int] = set()
    for group, members in _spread_groups(ctx.topology, claims):
        if any(id(p) in used for p in members):
            continue
        minimum = _minimum_per_zone(ctx.topology, group, members, zone_of)
        if not minimum:
            continue
        used.update(id(p) for p in members)
        stand_in = _smallest([info[id(p)] for p in members])
        for zone, count in minimum.items():
            out.setdefault(zone, []).extend([stand_in] * count)
    for _, allowed, members in model.groups:
        zones: set[str] = set()
        for j in allowed:
            zones.update(model.types[j].zones)
        if len(zones) == 1:
            (zone,) = zones
            out.setdefault(zone, []).extend(info[id(p)] for p in members if id(p) not in used)
    return out


def _single_zone(reqs: Requirements) -> str | None:
    req = reqs.get(lbl.ZONE)
    if req is None or req.complement or len(req.values) != 1:
        return None
    return next(iter(req.values))


def _smallest(values: Sequence[tuple[float, tuple[float, ...]]]) -> tuple[float, tuple[float, ...]]:
    """A stand-in no larger and no pricier than any member (forced counts are mere counts)."""
    price = min(v for v, _ in values)
    size = tuple(min(s[r] for _, s in values) for r in range(len(values[0][1])))
    return price, size


def _spread_groups(
    topology: Topology, claims: Sequence[NewNodeClaim]
) -> list[tuple[Group, list[Pod]]]:
    """Zone spread groups whose every selected pod on new capacity owns them as required."""
    selected: dict[int, tuple[Group, list[Pod]]] = {}
    uncounted: set[int] = set()  # groups a member's claim does not count toward
    for claim in claims:
        for pod in claim.pods:
            counting, _ = topology.selecting(pod)
            for group in counting:
                if group.kind == SPREAD and group.key == lbl.ZONE:
                    selected.setdefault(id(group), (group, []))[1].append(pod)
                    if not group.counts_on(claim.requirements, claim.taints):
                        uncounted.add(id(group))
    return [
        (group, members)
        for key, (group, members) in selected.items()
        if key not in uncounted and all(_owns(topology, group, pod) for pod in members)
    ]


def _owns(topology: Topology, group: Group, pod: Pod) -> bool:
    node_filter = PodWork.of(pod, False).node_filter()
    return any(
        tsc.when_unsatisfiable == DO_NOT_SCHEDULE
        and topology.spread_group(pod, tsc, node_filter) is group
        for tsc in pod.topology_spread
    )


def _minimum_per_zone(
    topology: Topology, group: Group, members: Sequence[Pod], zone_of: dict[int, str | None]
) -> dict[str, int]:
    """The fewest of ``members`` each zone must hold ({}: nothing is forced).

    With m the final count of the emptiest eligible zone, every eligible zone ends with at
    least m, and every zone that received a member with at most m + maxSkew; so a zone holds
    at least max(m - before, members - Σ other zones' room), minimised over every m possible.
    """
    eligible = set(topology.eligible(group))
    if group.min_domains is not None and len(eligible) < group.min_domains:
        return {}
    new: dict[str, int] = {}
    for pod in members:
        zone = zone_of.get(id(pod))
        if zone is None:
            return {}
        new[zone] = new.get(zone, 0) + 1
    domains = {*eligible, *new, *topology.universe.get(lbl.ZONE, {})}
    before = {d: group.counts.get(d, 0) - new.get(d, 0) for d in domains}
    if any(b < 0 for b in before.values()):
        return {}
    out = _least(before, eligible, len(members), group.max_skew)
    # the pass's own fleet is valid, so it meets these minimums; if not, this group's model
    # is wrong somewhere and it forces nothing (the bound stays a bound)
    if any(count > new.get(d, 0) for d, count in out.items()):
        return {}
    return out


def _least(before: dict[str, int], eligible: set[str], total: int, skew: int) -> dict[str, int]:
    """Per zone, the fewest new pods it holds over every possible emptiest-zone count m."""

    def room(m: int) -> dict[str, int]:
        return {d: max(0, m + skew - b) for d, b in before.items()}

    low = 0
    while sum(room(low).values()) < total:
        low += 1
    out: dict[str, int] = {}
    for d in sorted(before):
        least = total
        for m in range(low, low + total + 1):
            space = room(m)
            floor = m - before[d] if d in eligible else 0
            least = min(least, max(0, floor, total - (sum(space.values()) - space[d])))
        if least:
            out[d] = least
    return out


def _zone_program(model: _Model, zone: str, need: Sequence[float]) -> float:
    """Cheapest whole nodes in ``zone`` whose summed capacity covers ``need`` (proven bound)."""
    return _integer_cover([t for t in model.types if zone in t.zones], zone, need)


def _integer_cover(types: Sequence[_Type], zone: str, need: Sequence[float]) -> float:
    """HiGHS' proven bound on whole nodes of ``types`` (priced in ``zone``) covering ``need``."""
    if not any(v > 0 for v in need):
        return 0.0
    program = lp.Model([float(v) for v in need], [lp.INF] * len(need))
    for t in _pareto(types, zone):
        program.add_column(t.zones[zone], list(enumerate(t.capacity)), integer=True)
    if not program.columns:
        return 0.0
    solution = lp.solve(program, integer=True, node_limit=ZONE_NODES)
    return max(solution.bound, 0.0) if math.isfinite(solution.bound) else 0.0


def _pareto(types: Sequence[_Type], zone: str) -> list[_Type]:
    """Types no cheaper-or-equal type in ``zone`` beats on every resource."""
    kept: list[_Type] = []
    for t in sorted(types, key=lambda t: (t.zones[zone], t.template, t.index)):
        if not any(all(a >= b for a, b in zip(k.capacity, t.capacity, strict=True)) for k in kept):
            kept.append(t)
    return kept
