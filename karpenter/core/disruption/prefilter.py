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
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.model import resources as res
from karpenter.core.model.resources import Resources


def _free(ps: DisruptionPass) -> dict[str, dict[str, int]]:
    """Free room per live node as the solver starts from it (daemon overhead included)."""
    cache = ps.cache.get("free")
    if cache is None:
        base = ps.reuse.snapshot(ps.cluster)
        per_node = {e.state.name: res.floor_zero(e.remaining) for e in base.existing}
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


def _cheapest_holding(ps: DisruptionPass, requests: res.Resources) -> float | None:
    if ps.price_table is None:
        table = []
        for types in ps.types_by_pool.values():
            for it in types.values():
                prices = [o.price for o in it.offerings if o.available]
                if prices:
                    table.append((min(prices), it.allocatable))
        table.sort(key=lambda row: row[0])
        ps.price_table = table
    for price, allocatable in ps.price_table:
        if res.fits(requests, allocatable):
            return price
    return None


_FIRST = 4


def _homeless(ps: DisruptionPass, candidates: Sequence[Candidate]) -> dict[str, int]:
    """Summed requests of the candidates' pods that no other node has room for, each alone."""
    base = ps.reuse.snapshot(ps.cluster)
    own = {base.index[c.name] for c in candidates if c.name in base.index}
    homeless: list[Resources] = []
    for c in candidates:
        for shape, requests in _pods(ps, c)[1]:
            # The first few nodes with room for a request shape, memoized per pass: enough to
            # answer for any candidate set no larger than the list.
            entry = ps.room_for.get(shape)
            if entry is None or (not entry[1] and len(entry[0]) <= len(own)):
                limit = max(_FIRST, len(own) + 1)
                found = list(itertools.islice(base.free.candidates(0, requests), limit))
                entry = ps.room_for[shape] = (found, len(found) < limit)
            # Complete lists answer directly; a prefix longer than ``own`` has another node.
            if all(i in own for i in entry[0]):
                homeless.append(requests)
    return res.add(*homeless)


def cannot_consolidate(ps: DisruptionPass, candidates: Sequence[Candidate]) -> str:
    """Why consolidating ``candidates`` together cannot work ("" when unsure)."""
    free = _free(ps)
    elsewhere = dict(free["__total__"])
    requests: dict[str, int] = {}
    for c in candidates:
        elsewhere = res.subtract(elsewhere, free.get(c.name, {}))
        requests = res.add(requests, _pods(ps, c)[0])
    # The replacement must hold both the excess over the room elsewhere and every pod that
    # fits on no other node at all; the larger of the two, per resource, is a lower bound.
    excess = res.floor_zero(res.subtract(requests, elsewhere))
    residual = res.maximum((excess, _homeless(ps, candidates)))
    residual = {k: v for k, v in residual.items() if v > 0}
    if not residual:
        return ""
    floor = _cheapest_holding(ps, residual)
    from karpenter.core.disruption import split  # noqa: PLC0415 - split imports consolidation

    if split.worth_trying(ps, candidates, residual, floor):
        return ""
    if floor is None:
        return (
            f"TooManyReplacements: the other nodes lack room for {res.describe(residual)} of"
            " the pods and no instance type holds that much"
        )
    if floor < sum(c.price for c in candidates):
        return ""
    return (
        f"NotCheaper: the other nodes lack room for {res.describe(residual)} of the pods and"
        " no instance type that holds it is cheaper"
    )
