"""Cheap proofs that consolidating some candidates cannot work, to skip their simulation.

The simulation places the candidates' pods on the other nodes first and puts what is left on
one new NodeClaim (or, when splits are allowed, several: ``split.worth_trying`` decides
whether to simulate). On totals per resource: whatever exceeds the free
capacity of the other
nodes (Σ requests − Σ free elsewhere, the *residual*) must go on the replacement. So when the
residual is positive and no instance type of any NodePool holds it, consolidation would need
two NodeClaims or leave pods unplaced; and when every type that holds it costs at least the
candidates' price (cheapest offering), no replacement can be cheaper. Both bounds only ever
overestimate the room elsewhere and underestimate the replacement's price, so skipping never
loses a command; it only saves solver passes (multi-node probes and the many single nodes of
a busy cluster that can neither be emptied nor replaced).

Spot candidates without SpotToSpotConsolidation: once a replacement is certain (a positive
residual) and it could only be spot-capable, the answer is no. It could only be spot-capable
when nothing can narrow its zones or capacity types: every NodePool allows spot, every type
with an offering in a pool's zones offers spot there, no offering is reserved, and no pod that
the what-if places (the candidates', pending ones, those of deleting nodes, buffer pods) nor
any pod with required anti-affinity constrains where pods go.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.disruption.candidates import Candidate, reschedulable
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.disruption.simulation import pending_pods
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.pod import Pod
from karpenter.core.model.resources import Resources
from karpenter.core.provisioning.build import template_requirements
from karpenter.core.scheduling.requirements import Requirement

SPOT_TO_SPOT_DISABLED = (
    "SpotToSpotDisabled: SpotToSpotConsolidation is disabled, can't replace a spot node with a"
    " spot node"
)


def _free(ps: DisruptionPass) -> dict[str, dict[str, int]]:
    """Free room per live node as the solver starts from it (daemon overhead included)."""
    cache = ps.cache.get("free")
    if cache is None:
        base = ps.reuse.snapshot(ps.cluster)
        per_node = {
            e.state.name: res.floor_zero(e.remaining)
            for i, e in enumerate(base.existing)
            if i not in base.dead
        }
        cache = {"__total__": res.add(*per_node.values()), **per_node}
        ps.cache["free"] = cache
    return cache


Shape = tuple[tuple[str, int], ...]


def _pods(ps: DisruptionPass, c: Candidate) -> tuple[dict[str, int], list[tuple[Shape, Resources]]]:
    """A candidate's summed requests and its pods' request shapes (once per pass)."""
    known = ps.pod_shapes.get(c.name)
    if known is None:
        shapes = [(tuple(sorted(p.requests.items())), p.requests) for p in c.pods]
        known = ps.pod_shapes[c.name] = (res.add(*(r for _, r in shapes)), shapes)
    return known


def _frontier(table: list[tuple[float, dict[str, int]]]) -> list[tuple[float, dict[str, int]]]:
    """The rows no earlier (no dearer) row holds everything of: only they can be the first
    row that holds a request, so the scan below answers the same on them alone."""
    kept: list[tuple[float, dict[str, int]]] = []
    for price, allocatable in table:
        if not any(res.fits(allocatable, earlier) for _, earlier in kept):
            kept.append((price, allocatable))
    return kept


def _cheapest_holding(ps: DisruptionPass, requests: res.Resources) -> float | None:
    key = tuple(sorted(requests.items()))
    if key not in ps.holding:
        ps.holding[key] = _scan(ps, requests)
    return ps.holding[key]


def price_table(ps: DisruptionPass) -> list[tuple[float, dict[str, int]]]:
    """(cheapest available price, allocatable) of the types no cheaper type holds everything
    of, cheapest first (once per pass, or per plan when the world carries it)."""
    if ps.price_table is None:
        table = []
        for types in ps.types_by_pool.values():
            for it in types.values():
                prices = [o.price for o in it.offerings if o.available]
                if prices:
                    table.append((min(prices), it.allocatable))
        table.sort(key=lambda row: row[0])
        ps.price_table = _frontier(table)
    return ps.price_table


def _scan(ps: DisruptionPass, requests: res.Resources) -> float | None:
    table = price_table(ps)
    for price, allocatable in itertools.islice(table, _first_possible(ps, table, requests), None):
        if res.fits(requests, allocatable):
            return price
    return None


def _first_possible(
    ps: DisruptionPass, table: list[tuple[float, dict[str, int]]], requests: res.Resources
) -> int:
    """Where in ``table`` the scan for ``requests`` may start: a row before the first one
    whose allocatable, or an earlier row's, reaches a requested amount holds too little."""
    if ps.price_reach is None:
        ps.price_reach = _reach(table)
    start = 0
    for name, need in requests.items():
        if need > 0:
            reach = ps.price_reach.get(name)
            if reach is None:
                return len(table)  # no row has any of it
            start = max(start, bisect.bisect_left(reach, need))
    return start


def _reach(table: list[tuple[float, dict[str, int]]]) -> dict[str, list[int]]:
    """Per resource, the largest allocatable among the rows up to each one (non-decreasing)."""
    names = sorted({name for _, allocatable in table for name in allocatable})
    out: dict[str, list[int]] = {}
    for name in names:
        best = 0
        rows = []
        for _, allocatable in table:
            best = max(best, allocatable.get(name, 0))
            rows.append(best)
        out[name] = rows
    return out


_FIRST = 4


def _homeless(
    ps: DisruptionPass, candidates: Sequence[Candidate]
) -> tuple[list[Resources], list[Shape], dict[str, int]]:
    """Requests of the candidates' pods that no other node has room for, each alone (and as
    sorted items), and their sum."""
    own = {c.name for c in candidates}
    homeless: list[Resources] = []
    shapes: list[Shape] = []
    # Whether pods of a shape have room elsewhere is asked once per call: the first ask
    # settles the shape's list of nodes with room for a candidate set this large.
    alone: dict[Shape, bool] = {}
    counts: dict[Shape, tuple[Resources, int]] = {}
    for c in candidates:
        for shape, requests in _pods(ps, c)[1]:
            found = alone.get(shape)
            if found is None:
                found = alone[shape] = _nowhere_else(ps, own, shape, requests)
            if found:
                homeless.append(requests)
                shapes.append(shape)
                seen = counts.get(shape)
                counts[shape] = (requests, 1 if seen is None else seen[1] + 1)
    # summed per shape in the order shapes first appear: the pods' own sum, key order too
    together: dict[str, int] = {}
    for requests, n in counts.values():
        for name, value in requests.items():
            together[name] = together.get(name, 0) + n * value
    return homeless, shapes, together


def _nowhere_else(ps: DisruptionPass, own: set[str], shape: Shape, requests: Resources) -> bool:
    """Whether every node with room for ``requests`` is one of ``own``."""
    # The first nodes with room for a request shape (in pass order), and whether that is all
    # of them, memoized per pass: one of them outside ``own`` answers, and so does a complete
    # list; else the scan goes one node beyond ``own``'s size (some node there is not in it).
    entry = ps.room_for.get(shape)
    if entry is not None:
        found, complete = entry
        if any(name not in own for name in found):
            return False
        if complete:
            return True
    limit = max(_FIRST, len(own) + 1)
    base = ps.reuse.snapshot(ps.cluster)
    first = itertools.islice(base.free.candidates(0, requests), limit)
    found = [base.states[i].name for i in first]
    ps.room_for[shape] = (found, len(found) < limit)
    return all(name in own for name in found)


@dataclass(frozen=True, slots=True)
class Assessment:
    """The prefilter's answer for a set of candidates, with the two bounds behind it."""

    message: str  # why they cannot consolidate ("" when unsure)
    excess: dict[str, int]  # their requests beyond the free room of every other node
    homeless: list[Resources]  # requests of their pods no other node has room for
    shapes: list[Shape]  # the same requests as sorted items
    together: dict[str, int]  # the homeless pods' requests summed


def assess(ps: DisruptionPass, candidates: Sequence[Candidate]) -> Assessment:
    """Whether consolidating ``candidates`` together cannot work, and the bounds that say so."""
    excess = _excess(ps, candidates)
    homeless, shapes, together = _homeless(ps, candidates)
    # The replacement must hold both the excess over the room elsewhere and every pod that
    # fits on no other node at all; the larger of the two, per resource, is a lower bound.
    residual = res.maximum((excess, together))
    return Assessment(verdict(ps, candidates, residual), excess, homeless, shapes, together)


def _excess(ps: DisruptionPass, candidates: Sequence[Candidate]) -> dict[str, int]:
    """The candidates' requests beyond the free room of every other node."""
    free = _free(ps)
    elsewhere = dict(free["__total__"])
    requests: dict[str, int] = {}
    for c in candidates:
        elsewhere = res.subtract(elsewhere, free.get(c.name, {}))
        requests = res.add(requests, _pods(ps, c)[0])
    return res.floor_zero(res.subtract(requests, elsewhere))


def short_of_room(ps: DisruptionPass, candidates: Sequence[Candidate]) -> bool:
    """Whether the candidates' pods need new capacity for certain: their requests exceed the
    room elsewhere, or one of them fits no other node (``assess``'s bounds, without its
    verdict)."""
    return any(v > 0 for v in _excess(ps, candidates).values()) or bool(
        _homeless(ps, candidates)[0]
    )


def cannot_consolidate(ps: DisruptionPass, candidates: Sequence[Candidate]) -> str:
    """Why consolidating ``candidates`` together cannot work ("" when unsure)."""
    return assess(ps, candidates).message


def verdict(ps: DisruptionPass, candidates: Sequence[Candidate], residual: res.Resources) -> str:
    """The prefilter's answer when ``residual`` must go on a replacement ("" when unsure).

    A larger residual never turns a "cannot" into "unsure" once no split is worth trying (no
    split left in the pass, or none possible, or the fluid floor of the residual at or above
    the candidates' price): the cheapest type that holds it can only be dearer (or none), and
    the spot rule holds for any positive residual.
    """
    residual = {k: v for k, v in residual.items() if v > 0}
    found = _decision(ps, candidates, residual)
    if found == _NO_TYPE:
        return (
            f"TooManyReplacements: the other nodes lack room for {res.describe(residual)} of"
            " the pods and no instance type holds that much"
        )
    if found == _NOT_CHEAPER:
        return (
            f"NotCheaper: the other nodes lack room for {res.describe(residual)} of the pods and"
            " no instance type that holds it is cheaper"
        )
    return SPOT_TO_SPOT_DISABLED if found == _SPOT else ""


def refuses(ps: DisruptionPass, candidates: Sequence[Candidate], residual: res.Resources) -> bool:
    """``bool(verdict(...))`` without writing the message (the memo's rechecks ask this)."""
    return _decision(ps, candidates, {k: v for k, v in residual.items() if v > 0}) != _UNSURE


_UNSURE, _NO_TYPE, _NOT_CHEAPER, _SPOT = range(4)


def _decision(ps: DisruptionPass, candidates: Sequence[Candidate], residual: res.Resources) -> int:
    """``verdict``'s answer as a code (``residual``: positive values only)."""
    if not residual:
        return _UNSURE
    floor = _cheapest_holding(ps, residual)
    from karpenter.core.disruption import split  # noqa: PLC0415 - split imports consolidation

    if split.worth_trying(ps, candidates, residual, floor):
        return _UNSURE
    if floor is None:
        return _NO_TYPE
    if floor < sum(c.price for c in candidates):
        return _SPOT if _spot_only(ps, candidates) else _UNSURE
    return _NOT_CHEAPER


def _free_to_go_anywhere(pod: Pod) -> bool:
    """The pod narrows no claim's zones or capacity types (no placement constraint at all)."""
    return not (
        pod.node_selector
        or pod.required_node_terms
        or pod.preferred_node_terms
        or pod.topology_spread
        or pod.required_affinity
        or pod.preferred_affinity
        or pod.required_anti_affinity
        or pod.preferred_anti_affinity
        or pod.pvc_names
    )


_ANY = Requirement("", True, frozenset())


def _spot_everywhere(ps: DisruptionPass) -> bool:
    """Every claim a what-if on this snapshot makes could be spot (see the module docstring)."""
    cluster = ps.cluster
    for pool in cluster.nodepools:
        reqs = template_requirements(pool)
        if not reqs.get(lbl.CAPACITY_TYPE, _ANY).has(lbl.CAPACITY_TYPE_SPOT):
            return False
        zones = reqs.get(lbl.ZONE, _ANY)
        for it in cluster.instance_types.get(pool.name, ()):
            offered = [o for o in it.offerings if o.available and zones.has(o.zone)]
            if any(o.capacity_type == lbl.CAPACITY_TYPE_RESERVED for o in it.offerings):
                return False
            if offered and all(o.capacity_type != lbl.CAPACITY_TYPE_SPOT for o in offered):
                return False
    if ps.reuse.snapshot(cluster).anti_owners:
        return False
    waiting = pending_pods(cluster) + [
        p for s in ps.states if s.deleting for p in s.pods if reschedulable(p)
    ]
    # CapacityBuffer pods join the what-ifs too (disruption.headroom)
    return all(_free_to_go_anywhere(p) for p in [*waiting, *cluster.virtual_pods])


def _spot_only(ps: DisruptionPass, candidates: Sequence[Candidate]) -> bool:
    """A replacement of these candidates would be spot, which SpotToSpot must allow."""
    if ps.options.spot_to_spot_consolidation:
        return False
    if any(c.capacity_type != lbl.CAPACITY_TYPE_SPOT for c in candidates):
        return False
    if not ps.reuse.derived(ps.cluster, "prefilter.spot", lambda: _spot_everywhere(ps)):
        return False
    return all(_free_to_go_anywhere(p) for c in candidates for p in c.pods)
