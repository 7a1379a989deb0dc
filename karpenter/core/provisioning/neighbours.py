"""Large-neighbourhood search over a packing: repack a few bins at a time, keep what is cheaper.

Diving and the small integer program choose bins among the patterns column generation found
for the whole problem; a pattern that only pays together with two particular others is easily
missed. A *neighbourhood* is a few free bins of an answer (pinned bins keep their number, so
they stay out): their items form a small problem of their own, which ``packing.pack`` solves
with those bins as its incumbent, and a cheaper answer replaces them. Neighbourhoods are the
triples among the bins with the most room left, tried in a fixed order, a bounded number of
them, each charged to the pass's work budget, and only while the answer is further than
``GAP`` from the root LP (what whole bins aim for). A neighbourhood that could not save
``packing.CLOSE`` of the whole answer even at its fluid bound is not solved.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from karpenter.core.provisioning import packing, work

SIZE = 3  # bins per neighbourhood
POOL = 4  # the bins with most room left that neighbourhoods are drawn from
TRIES = 4  # neighbourhoods solved per problem at most
GAP = 0.01  # the answer's excess over the root LP above which the search runs
_EPS = 1e-9


def improve(
    problem: packing.Problem, packed: packing.Packed, budget: work.Budget
) -> list[packing.Bin]:
    """``packed``'s bins, with neighbourhoods repacked where that is cheaper."""
    bins = list(packed.bins)
    tries = 0
    while tries < TRIES and not budget.exhausted:
        if packing.cost(problem, bins) <= packed.relaxed * (1 + GAP):
            break
        better = None
        for chosen in _neighbourhoods(problem, bins):
            if tries >= TRIES or budget.exhausted:
                break
            tries += 1
            better = _repack(problem, bins, chosen, budget)
            if better is not None:
                break
        if better is None:
            break
        bins = better
    return bins


def _neighbourhoods(problem: packing.Problem, bins: Sequence[packing.Bin]) -> list[tuple[int, ...]]:
    """Triples (by index into ``bins``) of the ``POOL`` free bins with most room left (none
    when the free bins are no more than a triple: repacking them all is what ``pack`` did)."""
    free = [i for i, b in enumerate(bins) if not problem.kinds[b.kind].count]
    if len(free) <= SIZE:
        return []
    roomy = sorted(free, key=lambda i: (-_room_left(problem, bins[i]), i))[:POOL]
    return list(itertools.combinations(sorted(roomy), SIZE))


def _room_left(problem: packing.Problem, b: packing.Bin) -> float:
    """1 less the bin's fullest resource's share of its type's capacity."""
    load = problem.load(b.kind, b.counts)
    capacity = problem.types[b.type].capacity
    return 1.0 - max((n / c for n, c in zip(load, capacity, strict=True) if c > 0), default=0.0)


def _repack(
    problem: packing.Problem,
    bins: Sequence[packing.Bin],
    chosen: tuple[int, ...],
    budget: work.Budget,
) -> list[packing.Bin] | None:
    """``bins`` with the ``chosen`` ones repacked (None: no cheaper way found)."""
    part = [bins[i] for i in chosen]
    demand = tuple(sum(column) for column in zip(*(b.counts for b in part), strict=True))
    # pinned kinds are out of a neighbourhood: no bins of them, no types to open one on
    kinds = tuple(k if not k.count else packing.Kind(k.base, 0, ()) for k in problem.kinds)
    small = packing.Problem(problem.sizes, demand, problem.types, kinds)
    if packing.cost(problem, part) - packing.fluid(small) < packing.CLOSE * packing.cost(
        problem, bins
    ):
        return None  # whatever it finds saves less than CLOSE of the whole answer
    found = packing.pack(small, part, (), budget).bins
    if packing.cost(problem, found) >= packing.cost(problem, part) - _EPS:
        return None
    out = [b for i, b in enumerate(bins) if i not in chosen] + found
    return out if packing.feasible(problem, out) else None
