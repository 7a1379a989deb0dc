"""The zone part of the lower bound: pods every valid fleet puts in a given zone.

Required DoNotSchedule zone spreads whose pods on new capacity all own them fix, per zone, a
minimum count (the skew invariant: every zone that receives a pod ends within ``maxSkew`` of
the emptiest eligible zone); a pod allowed in one zone only is forced there. A zone's nodes
must cover its forced pods: an integer program over whole nodes (``cover``) bounds that zone's
price from below. Combined with the fluid prices, each zone costs at least max(its integer
bound, the fluid price of its pods), and the pods not forced anywhere are charged at fluid
prices beyond the zones' integer slack. A second bound couples the zones: one integer
program over every zone's whole nodes, where the forced pods stay in their zones and every
other pod goes to some zone it may use (``cover.zones_together``): a zone's spare room then
serves the other pods only once, which the fluid prices cannot see.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpenter.core.model import labels as lbl
from karpenter.core.model.pod import DO_NOT_SCHEDULE, Pod
from karpenter.core.provisioning import cover
from karpenter.core.provisioning.boundmodel import Model
from karpenter.core.provisioning.build import PassContext
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.results import NewNodeClaim
from karpenter.core.provisioning.topology import SPREAD, Group, Topology
from karpenter.core.scheduling.requirements import Requirements

Demand = list[tuple[float, tuple[float, ...]]]  # (fluid price, scaled size) per forced pod


def zones(
    ctx: PassContext, model: Model, claims: Sequence[NewNodeClaim], value: Sequence[float]
) -> float:
    """Σ over zones of max(integer bound of its forced pods, their fluid price), plus the
    fluid price of every other pod beyond the zones' integer slack."""
    forced, free = _forced(ctx, model, claims, value)
    total = sum(value[g] * len(m) for g, (_, _, m) in enumerate(model.groups))
    bound = slack = forced_value = 0.0
    for zone, demand in sorted(forced.items()):
        pods_value = sum(v for v, _ in demand)
        need = [sum(s[r] for _, s in demand) for r in range(len(model.names))]
        counts: dict[tuple[float, ...], int] = {}
        for _, size in demand:
            counts[size] = counts.get(size, 0) + 1
        whole = _zone_program(model, zone, need, counts)
        bound += max(whole, pods_value)
        slack += max(0.0, whole - pods_value)
        forced_value += pods_value
    separate = bound + max(0.0, total - forced_value - slack)
    if not forced:
        return separate
    together = {zone: [size for _, size in demand] for zone, demand in forced.items()}
    return max(separate, cover.zones_together(model.types, together, free))


def _forced(
    ctx: PassContext, model: Model, claims: Sequence[NewNodeClaim], value: Sequence[float]
) -> tuple[dict[str, Demand], list[cover.Free]]:
    """Per zone, the pods (or smallest-pod stand-ins) every valid fleet puts there; and the
    other pods, each with the zones it may use (a spread's members beyond its minimums as
    its stand-in, over the zones any member may use)."""
    zone_of = {id(p): _single_zone(c.requirements) for c in claims for p in c.pods}
    info = {
        id(p): (value[g], size)
        for g, (size, _, members) in enumerate(model.groups)
        for p in members
    }
    zones_of = {
        id(p): frozenset(z for j in allowed for z in model.types[j].zones)
        for _, allowed, members in model.groups
        for p in members
    }
    out: dict[str, Demand] = {}
    free: list[cover.Free] = []
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
        extra = len(members) - sum(minimum.values())
        if extra > 0:
            anywhere = frozenset(z for p in members for z in zones_of[id(p)])
            free.append((stand_in[1], anywhere, extra))
    for size, allowed, members in model.groups:
        zones = frozenset(z for j in allowed for z in model.types[j].zones)
        left = [p for p in members if id(p) not in used]
        if len(zones) == 1:
            (zone,) = zones
            out.setdefault(zone, []).extend(info[id(p)] for p in left)
        elif left:
            free.append((size, zones, len(left)))
    return out, free


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


def _zone_program(
    model: Model, zone: str, need: Sequence[float], counts: dict[tuple[float, ...], int]
) -> float:
    """Cheapest whole nodes in ``zone`` whose summed capacity covers ``need`` and that hold
    ``counts`` pods of each size (proven bound)."""
    return cover.integer_cover([t for t in model.types if zone in t.zones], zone, need, counts)
