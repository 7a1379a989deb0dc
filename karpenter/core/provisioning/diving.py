"""Whole bins from the packing's LP: diving, the small integer program, and tidying bins.

Diving fixes every pattern the LP uses at least once that many times, else rounds up the
fractional one whose rounding costs the LP least (of the ``STRONG`` most used), re-solves (and
re-prices what is left, for the first dives) until the LP is integral. The integer program
chooses among the patterns whose reduced cost is within the gap to the best packing known,
with HiGHS' node limit and no sub-MIP heuristics. Bins are then trimmed (items covered twice
removed, each bin retyped to the cheapest type that holds it) and merged pairwise while two
bins fit one cheaper type. Work is charged to the engine's budget; a dive cut short by it
rounds its last LP up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from karpenter.core.provisioning import lp
from karpenter.core.provisioning.colgen import Engine
from karpenter.core.provisioning.packing import Bin, Column, feasible

DIVE_ROUNDS = 2  # pricing rounds after each dive, for the first PRICED_DIVES dives
PRICED_DIVES = 20
DIVE_SEARCHED = 8
STRONG = 8  # fractional patterns tried before rounding one up
MIP_COLUMNS = 80
MIP_NODES = 200
MIP_GAP = 0.002
_EPS = 1e-9
_INT = 1e-6  # an LP value within this of an integer is that integer


def dive(e: Engine, relaxed: lp.Solution, cutoff: float) -> list[Bin] | None:
    """Whole bins from the LP: fix what it uses whole, round up its most-used fraction,
    re-solve (and re-price, for the first dives) until it is integral (None: the LP
    reached ``cutoff``, so this dive cannot end cheaper than that). When the budget runs
    out the dive ends at once: every fraction of the last LP rounded up."""
    dives = 0
    while True:
        if e.budget.exhausted:
            return _bins(e, relaxed.values)
        if not _round(e, relaxed.values):
            break
        dives += 1
        rounds = DIVE_ROUNDS if dives <= PRICED_DIVES else 0
        solved = e.generate(rounds, wide=True, searched=DIVE_SEARCHED)
        if solved is None and e.budget.exhausted:
            return _bins(e, relaxed.values)
        if solved is None or solved.objective >= cutoff - _EPS:
            return None
        relaxed = solved
    return _bins(e, ())


def _round(e: Engine, values: Sequence[float]) -> bool:
    """Open bins toward ``values``; False when the fixed bins already match (integral).

    Every pattern used at least once more than fixed is fixed that many more times; when
    none is, the fractional pattern whose rounding up costs the LP least (among the
    ``STRONG`` most used) is opened once.
    """
    whole: list[tuple[int, int]] = []
    fractional: list[tuple[float, int]] = []
    for j, x in enumerate(values):
        n = int(x + _INT)
        if n > e.fixed[j]:
            whole.append((j, n - e.fixed[j]))
        elif x - e.fixed[j] > _INT:
            fractional.append((e.fixed[j] - x, j))
    for j, n in whole:
        for _ in range(n):
            _open(e, j)
    if whole or not fractional:
        return bool(whole)
    fractional.sort()
    best: tuple[float, int] | None = None
    for _, j in fractional[:STRONG] if len(fractional) > 1 else ():
        opened = _open(e, j)
        solved = e.solve()
        _close(e, opened)
        value = solved.objective if solved is not None else lp.INF
        if best is None or value < best[0] - _EPS:
            best = (value, j)
    _open(e, fractional[0][1] if best is None else best[1])
    return True


def _open(e: Engine, j: int) -> tuple[int, tuple[int, ...]]:
    """Fix one more bin of column ``j``'s pattern, less what is already covered, at the
    cheapest type that holds the rest (a column of its own when that differs); the
    column fixed and the items it covers."""
    kind, t, counts = e.columns[j]
    clipped = tuple(min(c, d) for c, d in zip(counts, e.demand, strict=True))
    if clipped != counts:
        j = e.column(kind, t, clipped)
    e.flush()
    e.shift(j, clipped, 1)
    return j, clipped


def _close(e: Engine, opened: tuple[int, tuple[int, ...]]) -> None:
    """Undo one ``_open``."""
    e.shift(*opened, -1)


def _bins(e: Engine, values: Sequence[float]) -> list[Bin]:
    """The fixed bins, each column raised to its LP value in ``values`` rounded up (an LP
    answer covers the demand, so its rounding up does too)."""
    bins: list[Bin] = []
    for j, (kind, t, counts) in enumerate(e.columns):
        n = e.fixed[j]
        if j < len(values):
            n = max(n, math.ceil(values[j] - _INT))
        bins.extend(Bin(kind, t, counts) for _ in range(n))
    return bins


def trim(e: Engine, bins: Sequence[Bin]) -> list[Bin]:
    """Remove items covered twice (from the last bins first), then retype each bin to the
    cheapest type that holds it and drop free bins left empty."""
    p = e.p
    surplus = [-d for d in p.demand]
    for b in bins:
        for g, n in enumerate(b.counts):
            surplus[g] += n
    out: list[Bin] = []
    for b in reversed(bins):
        counts = list(b.counts)
        for g, extra in enumerate(surplus):
            take = min(extra, counts[g])
            counts[g] -= take
            surplus[g] -= take
        if p.kinds[b.kind].count == 0 and not any(counts):
            continue
        out.append(Bin(b.kind, e.cheapest(b.kind, counts, b.type), tuple(counts)))
    out.reverse()
    return out


def improve(e: Engine, bins: Sequence[Bin]) -> list[Bin]:
    """Merge two bins into one cheaper bin while any such pair exists (a free bin's items
    may join any bin; two pinned bins never merge)."""
    p = e.p
    bins = list(bins)
    merged = True
    while merged:
        merged = False
        for i, j in ((i, j) for i in range(len(bins)) for j in range(len(bins))):
            a, b = bins[i], bins[j]
            if i == j or p.kinds[b.kind].count:
                continue
            counts = tuple(x + y for x, y in zip(a.counts, b.counts, strict=True))
            t = e.cheapest(a.kind, counts, -1)
            pair = p.types[a.type].price + p.types[b.type].price
            if t >= 0 and p.types[t].price < pair - _EPS:
                bins[i] = Bin(a.kind, t, counts)
                del bins[j]
                merged = True
                break
    return bins


def candidates(e: Engine, relaxed: lp.Solution, cutoff: float) -> list[Column]:
    """At most ``MIP_COLUMNS`` patterns that a packing cheaper than ``cutoff`` may use,
    lowest reduced cost (under ``relaxed``'s duals) first: a pattern whose reduced cost
    exceeds the gap to ``cutoff`` cannot be in one (cost = LP + Σ reduced cost × bins)."""
    p = e.p
    gap = cutoff - relaxed.objective
    ranked = []
    for j, (kind, t, counts) in enumerate(e.columns):
        worth = sum(relaxed.duals[g] * n for g, n in enumerate(counts) if n)
        row = e.kind_rows.get(kind)
        if row is not None:
            worth += relaxed.duals[row]
        reduced = p.types[t].price - worth
        if reduced <= gap + 1e-7:
            ranked.append((reduced, j))
    ranked.sort()
    return [e.columns[j] for _, j in ranked[:MIP_COLUMNS]]


def integer(e: Engine, chosen: Sequence[Column], cutoff: float) -> list[Bin] | None:
    """The cheapest choice of bins among ``chosen``, cheaper than ``cutoff`` (None: none
    found within the node limit)."""
    p = e.p
    groups = len(p.demand)
    lower = [float(d) for d in p.demand] + [float(p.kinds[k].count) for k in e.kind_rows]
    upper = [lp.INF] * groups + [float(p.kinds[k].count) for k in e.kind_rows]
    model = lp.Model(lower, upper)
    for column in chosen:
        model.add_column(p.types[column[1]].price, e.entries(column), integer=True)
    solution = lp.solve(
        model,
        integer=True,
        gap=MIP_GAP,
        node_limit=MIP_NODES,
        cutoff=cutoff - _EPS,
        lean=True,
        iterations=e.budget.left,
    )
    e.budget.charge(solution.work)
    if not solution.ok:
        return None
    bins: list[Bin] = []
    for (kind, t, counts), value in zip(chosen, solution.values, strict=True):
        bins.extend(Bin(kind, t, counts) for _ in range(round(value)))
    return improve(e, trim(e, bins)) if feasible(p, bins) else None
