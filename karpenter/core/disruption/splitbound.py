"""A lower bound on what two or more new nodes holding given requests cost: whole nodes.

A split (``split``) pays only when at least two replacements, together holding the pods that
need new capacity, cost less than the candidates. The fluid floor (``split.fluid_floor``) lets
nodes be fractional, so it misses the commonest reason a split cannot pay: a node is bought
whole. Take one resource at a time: the nodes' allocatable must add up to at least the pods'
requests, so the cheapest multiset of at least two instance types whose allocatable of that
resource adds up to the request (a one-dimensional covering knapsack, solved exactly by dynamic
programming) costs no more than any split. Only types priced under the budget less the
cheapest type can be part of a split under budget, so the program runs over few types.

The program runs on a grid fixed per resource (a sixteenth of the smallest type): capacities
are rounded up to whole steps and the request counted in whole steps (a node set covering the
request covers its rounded-up step count), which only relaxes, so the result stays a bound.
Prices are each type's cheapest available offering, at most the worst-case launch price a
split is charged (``split._replacements``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from karpenter.core.model import resources as res

STEPS_PER_NODE = 16  # grid steps in the smallest type's allocatable
GRID = 512  # steps a request is counted in at most, or more while the work allows:
WORK = 20_000  # (step, type) pairs one program visits at most
_TRACKED = (res.CPU, res.MEMORY, res.PODS)
# Splits whose savings are below this share of the candidates' price count as none
# (``split._replacements``): a tie in exact arithmetic must not pass on rounding.
TIE = 1e-9

Row = tuple[float, int]  # (price, size of one resource)


def cover_two(rows: Sequence[Row], need: int) -> float:
    """The cheapest multiset of at least two ``rows`` (price, size), repeats allowed, whose
    sizes add up to at least ``need`` (``math.inf`` without rows)."""
    return _Program(list(rows), 1).two_or_more(need) if rows else math.inf


def _greedy(rows: Sequence[Row], need: int) -> float:
    """What two or more copies of one row cost at best (an upper bound on ``cover_two``)."""
    return min(max(2, -(-need // c)) * p for p, c in rows)


def pareto(table: Sequence[tuple[float, dict[str, int]]], name: str) -> list[Row]:
    """(price, size of ``name``) of the types no type at most as dear and at least as large
    beats, cheapest first."""
    out: list[Row] = []
    for price, size in sorted(
        ((p, a.get(name, 0)) for p, a in table), key=lambda row: (row[0], -row[1])
    ):
        if size > 0 and (not out or size > out[-1][1]):
            out.append((price, size))
    return out


@dataclass(slots=True)
class _Program:
    """The covering program over one resource's rows, on a fixed grid, grown on demand."""

    rows: list[Row]  # (price, size in grid steps)
    unit: int  # grid step in the resource's milli-units
    best: list[float] = field(default_factory=lambda: [0.0])  # best[r]: at least r steps

    def steps(self, need: int) -> int:
        """``need`` in whole steps, capped where the program stops growing: a smaller count
        gives a smaller (still valid) bound, and the cap keeps it monotone in ``need``."""
        return min(-(-need // self.unit), max(GRID, WORK // len(self.rows)))

    def two_or_more(self, count: int) -> float:
        """The cheapest multiset of at least two rows covering ``count`` steps."""
        best, rows = self.best, self.rows
        for r in range(len(best), count + 1):
            best.append(min(p + best[r - c] if c < r else p for p, c in rows))
        cheapest = min(p for p, _ in rows)
        return min(p + (best[count - c] if c < count else cheapest) for p, c in rows)


@dataclass(slots=True)
class WholeNodes:
    """The bound over one catalogue (``table``: each type's cheapest available price and its
    allocatable), its programs kept. Per resource the grid depends on the types alone and
    the count is capped (``_Program.steps``), so the bound only grows with the requests: a
    proof for some requests holds for any larger ones (``verdicts`` relies on that)."""

    table: Sequence[tuple[float, dict[str, int]]]
    _rows: dict[str, list[Row]] = field(default_factory=dict)
    _programs: dict[tuple[str, int], _Program] = field(default_factory=dict)
    _cheapest: float | None = None
    # The last question and its answer: the prefilter asks the same one twice in a row
    # (whether a split is worth trying, then how its answer depends on splits).
    _last: tuple[tuple[int, ...], float, float] | None = None

    def floor(self, requests: res.Resources, budget: float) -> float:
        """A price no two or more nodes holding ``requests`` undercut, exact up to
        ``budget``: at or above ``budget`` means no such set costs less."""
        key = tuple(requests.get(name, 0) for name in _TRACKED)
        last = self._last
        if last is not None and last[0] == key and last[1] == budget:
            return last[2]
        found = self._floor(requests, budget)
        self._last = (key, budget, found)
        return found

    def _floor(self, requests: res.Resources, budget: float) -> float:
        if not self.table:
            return math.inf
        if self._cheapest is None:
            self._cheapest = min(p for p, _ in self.table)
        cheapest = self._cheapest
        floor = 2 * cheapest
        for name in _TRACKED:
            need = requests.get(name, 0)
            if need > 0 and floor < budget:
                floor = max(floor, self._resource(name, need, budget - cheapest, budget))
        return floor

    def _resource(self, name: str, need: int, below: float, budget: float) -> float:
        rows = self._rows.get(name)
        if rows is None:
            rows = self._rows[name] = pareto(self.table, name)
        count = bisect.bisect_left(rows, (below,))
        if count == 0:
            return math.inf  # no two types fit the budget at all
        program = self._programs.get((name, count))
        if program is None:
            unit = max(1, rows[0][1] // STEPS_PER_NODE)
            grid = [(p, -(-size // unit)) for p, size in rows[:count]]
            program = self._programs[(name, count)] = _Program(grid, unit)
        steps = program.steps(need)
        if _greedy(program.rows, steps) < budget * (1 - TIE):
            return 0.0  # this resource cannot prove it (the program is at most that)
        return program.two_or_more(steps)

    def may_undercut(self, requests: res.Resources, budget: float) -> bool:
        """Whether two or more nodes holding ``requests`` might cost less than ``budget``
        (False: proven not, ties within ``TIE`` included)."""
        return self.floor(requests, budget) < budget * (1 - TIE / 2)
