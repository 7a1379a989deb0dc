"""Whole-bin covers: a proof that no packing of a problem is cheaper than a given price.

The sizes of a problem's items share, per resource, a common divisor (pods of 1 or 1.5 CPUs,
of 2 or 4 GiB), so a bin holds at most its capacity rounded down to that divisor, and any
packing's bins, counted in those units, add up to at least the demand. The cheapest multiset of
bin types whose rounded capacities cover the demand (an unbounded knapsack cover, solved
exactly by a program over units) therefore costs no more than any packing. That floor is
sharper than the fluid one (``packing.fluid``) exactly where first fit's last node was rounded
up to a whole type: when it reaches the first fit's price, no search can find a cheaper
packing, and the cost pass keeps the first fit's bins without one (``costpass``).

Only problems without pinned kinds are judged (a pinned bin's base is not an item). Work is
bounded by counts, never time: a resource whose program would fill more than ``MAX_CELLS``
cells or take more than ``MAX_STEPS`` array steps proves nothing. numpy is loaded with the
packing's HiGHS, so this module is imported only by a cost pass that runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from karpenter.core.provisioning.packing import Problem

MAX_CELLS = 4_000_000  # bin types × units per resource's program
MAX_STEPS = 400  # array steps per resource's program (units / the smallest type's units)
# A price "not beaten" leaves room for float sums: the cost pass moves only for savings above
# its ε of 1e-9, and a cover summed in another order differs from it by far less than this.
TOLERANCE = 5e-10
_PRUNE = 1e-11  # a type's excess above the slack by more than float error: it cannot appear


def proven(problem: Problem, price: float) -> bool:
    """Whether no packing of ``problem`` costs less than ``price`` (beyond ``TOLERANCE``):
    some resource's cheapest whole-bin cover already costs that much."""
    if not problem.demand or any(kind.count for kind in problem.kinds):
        return False
    types = sorted({t for kind in problem.kinds for t in kind.types})
    target = price - TOLERANCE
    for r in _by_fluid(problem, types):
        if covers_at_least(problem, types, r, target):
            return True
    return False


def _by_fluid(problem: Problem, types: Sequence[int]) -> list[int]:
    """Resources in the order their fluid floor is highest (the likeliest proof first)."""
    floors = []
    for r in range(len(problem.sizes[0]) if problem.sizes else 0):
        need = sum(n * size[r] for size, n in zip(problem.sizes, problem.demand, strict=True))
        units = [
            problem.types[t].price / problem.types[t].capacity[r]
            for t in types
            if problem.types[t].capacity[r] > 0
        ]
        if need > 0 and units:
            floors.append((-need * min(units), r))
    return [r for _, r in sorted(floors)]


def rows(problem: Problem, types: Sequence[int], r: int) -> tuple[int, list[tuple[float, int]]]:
    """Resource ``r``'s demand in units of its items' common divisor, and each type as (price,
    whole units it holds, at most the demand), none another type holds as many of for no more.
    """
    sizes = [s[r] for s, n in zip(problem.sizes, problem.demand, strict=True) if n and s[r] > 0]
    if not sizes:
        return 0, []
    unit = math.gcd(*sizes)
    need = sum(n * s[r] for s, n in zip(problem.sizes, problem.demand, strict=True)) // unit
    priced = sorted(
        ((problem.types[t].price, min(problem.types[t].capacity[r] // unit, need)) for t in types),
        key=lambda row: (-row[1], row[0]),
    )
    kept: list[tuple[float, int]] = []
    for price, units in priced:
        if units > 0 and (not kept or price < kept[-1][0]):
            kept.append((price, units))
    return need, kept


def cheapest_cover(need: int, rows: Sequence[tuple[float, int]]) -> float:
    """The least price of bins (any number of each row's type) holding ``need`` units."""
    best = [0.0] * (need + 1)
    for x in range(1, need + 1):
        best[x] = min(price + best[max(x - units, 0)] for price, units in rows)
    return best[need]


def covers_at_least(problem: Problem, types: Sequence[int], r: int, target: float) -> bool:
    """Whether every whole-bin cover of resource ``r``'s demand costs at least ``target``
    (False also when the program is beyond the work limits)."""
    need, kept = rows(problem, types, r)
    if need == 0 or not kept:
        return False
    ratio = min(price / units for price, units in kept)
    slack = target - ratio * need
    if slack <= 0:
        return True  # the fluid floor of this resource alone reaches the target
    # A cover costs ratio × need plus each bin's excess over the best ratio: a type whose
    # excess exceeds the slack cannot be in a cover cheaper than the target.
    kept = [(p, u) for p, u in kept if p - ratio * u <= slack + _PRUNE]
    step = min(u for _, u in kept)
    if len(kept) * need > MAX_CELLS or need > step * MAX_STEPS:
        return False
    return bool(_program(need, kept, step) >= target)


def _program(need: int, kept: Sequence[tuple[float, int]], step: int) -> float:
    """``cheapest_cover`` over arrays: no type holds fewer than ``step`` units, so ``step``
    consecutive amounts depend only on smaller ones and are filled in one array step."""
    prices = np.array([p for p, _ in kept], dtype=np.float64)[:, None]
    units = np.array([u for _, u in kept], dtype=np.int64)[:, None]
    best = np.zeros(need + 1, dtype=np.float64)
    offsets = np.arange(step, dtype=np.int64)[None, :]
    for start in range(1, need + 1, step):
        amounts = offsets[:, : need + 1 - start] + start
        best[amounts[0]] = (prices + best[np.maximum(amounts - units, 0)]).min(axis=0)
    return float(best[need])
