"""Variable-size bin packing over instance types: which bins of which types hold which items.

Items come in groups of equal size (a resource vector per group, with a demand); bins have a
type (price, capacity) and a kind: free bins may be opened in any number, while a pinned kind
stands for ``count`` bins that must exist and already hold ``base`` (pods that may not move).
A bin's *pattern* is how many items of each group it holds.

This module owns the problem and the driver. When the incumbent is already within ``CLOSE``
of the fluid bound (every resource at its cheapest price per unit) it is the answer: no
search could save more. Otherwise the method is cutting-stock column generation
(``colgen``: an LP over known patterns whose duals price the items, pricing proposing
patterns worth more than their type, a bounded number of rounds) and then whole bins
(``diving``: dives, merging, a small integer program). The incumbent (the
first pass's own packing) is among the patterns and is kept whenever nothing cheaper is found,
so the answer is never dearer than it. Work is bounded by counts (rounds, patterns, search
nodes, simplex iterations, dives), never by time, and charged to a ``work.Budget``: once it is
spent no further step starts, a dive under way is finished by rounding its LP up, and the
cheapest valid packing found so far (at worst the incumbent) is the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.provisioning import work

ROUNDS = 20  # pricing rounds before diving
TAIL_ROUNDS = 1  # pricing rounds over every fitting type once the LP has settled
# Work units that must be left for the integer program to start: HiGHS caps its nodes but not
# the sum of its LPs' iterations, so it runs only with room for the most any bench class took
# (about 1,300 units: ≤ MIP_COLUMNS columns, ≤ MIP_NODES nodes, no sub-MIP heuristics).
MIP_RESERVE = 2_500
CLOSE = 0.002  # an incumbent within this of the fluid bound is kept without a search
_EPS = 1e-9

Column = tuple[int, int, tuple[int, ...]]  # kind, type, counts


@dataclass(frozen=True, slots=True)
class BinType:
    """An instance type as a bin: its hourly price and capacity per resource."""

    price: float
    capacity: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of bin: free (``count`` 0, any number) or ``count`` pinned bins holding ``base``."""

    base: tuple[int, ...]
    count: int
    types: tuple[int, ...]  # indexes into Problem.types a bin of this kind may be


@dataclass(frozen=True, slots=True)
class Bin:
    """One bin of the answer: its kind, type and how many items of each group it holds."""

    kind: int
    type: int
    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """Groups of items (size per resource, demand), the bin types and the kinds of bins."""

    sizes: tuple[tuple[int, ...], ...]
    demand: tuple[int, ...]
    types: tuple[BinType, ...]
    kinds: tuple[Kind, ...]

    def load(self, kind: int, counts: Sequence[int]) -> list[int]:
        """What a bin of ``kind`` holding ``counts`` needs, per resource."""
        total = list(self.kinds[kind].base)
        for group, n in enumerate(counts):
            if n:
                for r, size in enumerate(self.sizes[group]):
                    total[r] += n * size
        return total

    def cheapest(self, kind: int, counts: Sequence[int]) -> int | None:
        """The cheapest type of ``kind`` that holds ``counts`` (ties: lowest index)."""
        need = self.load(kind, counts)
        best: int | None = None
        for t in self.kinds[kind].types:
            capacity = self.types[t].capacity
            if all(n <= c for n, c in zip(need, capacity, strict=True)) and (
                best is None or self.types[t].price < self.types[best].price
            ):
                best = t
        return best

    def room(self, kind: int, t: int) -> tuple[int, ...]:
        """What a bin of ``kind`` and type ``t`` has left for items, per resource."""
        base = self.kinds[kind].base
        return tuple(c - b for c, b in zip(self.types[t].capacity, base, strict=True))


def cost(problem: Problem, bins: Sequence[Bin]) -> float:
    """Hourly price of ``bins``."""
    return sum(problem.types[b.type].price for b in bins)


@dataclass(frozen=True, slots=True)
class Packed:
    """The packing chosen, and the patterns worth handing to a similar problem."""

    bins: list[Bin]
    patterns: tuple[Column, ...]
    relaxed: float = 0.0  # the root LP's price (0: not solved): what whole bins aim for


def pack(
    problem: Problem,
    incumbent: Sequence[Bin],
    hints: Sequence[Column] = (),
    budget: work.Budget | None = None,
) -> Packed:
    """A packing no dearer than ``incumbent`` (which must be feasible), usually cheaper;
    ``hints`` are patterns to start from (a similar problem's, already fitted to this one);
    the work done is charged to ``budget`` (default: a fresh ``work.Budget``)."""
    budget = budget if budget is not None else work.Budget()
    if not problem.demand or budget.exhausted:
        return Packed(list(incumbent), ())
    floor = fluid(problem)
    if cost(problem, incumbent) <= floor * (1 + CLOSE):
        # no packing saves more than CLOSE of this one: not worth a column generation
        return Packed(list(incumbent), (), floor)
    # column generation and diving load HiGHS and numpy, and build on this module's types
    from karpenter.core.provisioning import colgen, diving  # noqa: PLC0415

    engine = colgen.Engine(problem, budget)
    for kind, t, counts in [*((b.kind, b.type, b.counts) for b in incumbent), *hints]:
        engine.add(kind, t, counts)
    engine.seed()
    root = engine.generate(ROUNDS)
    if root is not None:
        # patterns on every type within the gap to the incumbent: whole bins need them
        gap = cost(problem, incumbent) - root.objective
        root = engine.generate(TAIL_ROUNDS, wide=True, slack=max(gap, 0.0)) or root
    if root is None:
        return Packed(list(incumbent), ())
    dived = diving.dive(engine, root, cost(problem, incumbent))
    best = diving.improve(engine, diving.trim(engine, dived or []))
    best = _cheaper(problem, list(incumbent), best)
    candidates = diving.candidates(engine, root, cost(problem, best))
    if cost(problem, best) > root.objective * (1 + diving.MIP_GAP) and budget.left >= MIP_RESERVE:
        found = diving.integer(engine, candidates, cost(problem, best))
        best = _cheaper(problem, best, found or [])
    kept = dict.fromkeys([*((b.kind, b.type, b.counts) for b in best), *candidates])
    return Packed(best, tuple(kept), root.objective)


def fluid(problem: Problem) -> float:
    """A price no packing beats: per resource, everything the bins must hold (pinned bases
    included) at the cheapest price per unit of that resource among the types; the largest."""
    total = [0] * len(problem.sizes[0]) if problem.sizes else []
    for size, n in zip(problem.sizes, problem.demand, strict=True):
        for r, s in enumerate(size):
            total[r] += n * s
    for kind in problem.kinds:
        for r, b in enumerate(kind.base):
            total[r] += kind.count * b
    floor = 0.0
    for r, need in enumerate(total):
        units = [t.price / t.capacity[r] for t in problem.types if t.capacity[r] > 0]
        if need > 0 and units:
            floor = max(floor, need * min(units))
    return floor


def _cheaper(problem: Problem, best: list[Bin], other: list[Bin]) -> list[Bin]:
    """``other`` when it is a valid packing cheaper than ``best``, else ``best``."""
    if other and feasible(problem, other) and cost(problem, other) < cost(problem, best) - _EPS:
        return other
    return best


def feasible(p: Problem, bins: Sequence[Bin]) -> bool:
    """Whether ``bins`` cover the demand, hold what they carry, and use every pinned bin."""
    covered = [0] * len(p.demand)
    per_kind = [0] * len(p.kinds)
    for b in bins:
        per_kind[b.kind] += 1
        need = p.load(b.kind, b.counts)
        capacity = p.types[b.type].capacity
        if b.type not in p.kinds[b.kind].types or any(
            n > c for n, c in zip(need, capacity, strict=True)
        ):
            return False
        for g, n in enumerate(b.counts):
            covered[g] += n
    return all(c >= d for c, d in zip(covered, p.demand, strict=True)) and all(
        not k.count or per_kind[i] == k.count for i, k in enumerate(p.kinds)
    )
