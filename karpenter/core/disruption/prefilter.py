"""Cheap proofs that consolidating some candidates cannot work, to skip their simulation.

The simulation places the candidates' pods on the other nodes first and puts what is left on
one new NodeClaim. On totals per resource: whatever exceeds the free capacity of the other
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
from karpenter.core.provisioning.freeindex import FreeIndex


def _free(ps: DisruptionPass) -> dict[str, dict[str, int]]:
    cache = ps.cache.get("free")
    if cache is None:
        per_node: dict[str, dict[str, int]] = {}
        for s in ps.states:
            if s.deleting:
                continue
            per_node[s.name] = res.floor_zero(res.subtract(s.allocatable, s.requested()))
        total = res.add(*per_node.values())
        cache = {"__total__": total, **per_node}
        ps.cache["free"] = cache
    return cache


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
    free = _free(ps)
    if ps.free_index is None:
        ps.free_names = [name for name in free if name != "__total__"]
        ps.free_index = FreeIndex([free[name] for name in ps.free_names])
        ps.free_positions = {name: i for i, name in enumerate(ps.free_names)}
    own = {ps.free_positions[c.name] for c in candidates if c.name in ps.free_positions}
    index = ps.free_index
    homeless: dict[str, int] = {}
    for c in candidates:
        for pod in c.pods:
            # The first few nodes with room for a request shape, memoized per pass: enough to
            # answer for any candidate set no larger than the list.
            shape = tuple(sorted(pod.requests.items()))
            entry = ps.room_for.get(shape)
            if entry is None or (not entry[1] and len(entry[0]) <= len(own)):
                limit = max(_FIRST, len(own) + 1)
                found = list(itertools.islice(index.candidates(0, pod.requests), limit))
                entry = ps.room_for[shape] = (found, len(found) < limit)
            # Complete lists answer directly; a prefix longer than ``own`` has another node.
            if all(i in own for i in entry[0]):
                homeless = res.add(homeless, pod.requests)
    return homeless


def cannot_consolidate(ps: DisruptionPass, candidates: Sequence[Candidate]) -> str:
    """Why consolidating ``candidates`` together cannot work ("" when unsure)."""
    free = _free(ps)
    elsewhere = dict(free["__total__"])
    requests: dict[str, int] = {}
    for c in candidates:
        elsewhere = res.subtract(elsewhere, free.get(c.name, {}))
        requests = res.add(requests, *(p.requests for p in c.pods))
    # The replacement must hold both the excess over the room elsewhere and every pod that
    # fits on no other node at all; the larger of the two, per resource, is a lower bound.
    excess = res.floor_zero(res.subtract(requests, elsewhere))
    residual = res.maximum((excess, _homeless(ps, candidates)))
    residual = {k: v for k, v in residual.items() if v > 0}
    if not residual:
        return ""
    floor = _cheapest_holding(ps, residual)
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
