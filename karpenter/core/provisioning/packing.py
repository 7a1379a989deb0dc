"""Variable-size bin packing over instance types: which bins of which types hold which items.

Items come in groups of equal size (a resource vector per group, with a demand); bins have a
type (price, capacity) and a kind: free bins may be opened in any number, while a pinned kind
stands for ``count`` bins that must exist and already hold ``base`` (pods that may not move).
A bin's *pattern* is how many items of each group it holds.

The method is classic cutting-stock column generation: an LP over known patterns gives dual
prices per item; for every (kind, type) a greedy multi-dimensional knapsack looks for a pattern
whose items are worth more than the type's price, and adds it; this repeats a bounded number of
rounds. An integer program over all patterns found then picks how many bins of each. The
incumbent (the first pass's own packing) is among the patterns, and is kept whenever the MIP
finds nothing cheaper, so the answer is never dearer than it. Work is bounded by counts (rounds,
patterns, search nodes, simplex iterations, branch-and-bound nodes), never by time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.provisioning import lp

ROUNDS = 20
MAX_COLUMNS = 3000
KNAPSACK_NODES = 200
KEEP_PATTERNS = 3
SEARCHED_TYPES = 8
MIP_COLUMNS = 200
MIP_GAP = 0.002  # relative: stop once the best packing is proven within 0.2%
PRICING_TYPES = 100
DOMINANCE_WINDOW = 32
_EPS = 1e-9


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


def cost(problem: Problem, bins: Sequence[Bin]) -> float:
    """Hourly price of ``bins``."""
    return sum(problem.types[b.type].price for b in bins)


def pack(problem: Problem, incumbent: Sequence[Bin]) -> list[Bin]:
    """A packing no dearer than ``incumbent`` (which must be feasible), usually cheaper."""
    if not problem.demand:
        return list(incumbent)
    columns = _Columns(problem)
    for b in incumbent:
        columns.add(b.kind, b.type, b.counts)
    relaxed = columns.generate()
    if relaxed is not None:
        # Patterns that suit what the LP's whole bins leave over: the LP's own patterns
        # rarely combine into a good integer answer on their own.
        residual = _residual(problem, columns, relaxed)
        if residual is not None:
            rest = _Columns(residual, columns.pricing_types)
            rest.generate(ROUNDS // 2)
            for kind, t, counts in rest.columns:
                columns.add(kind, t, counts)
        # A pattern whose reduced cost exceeds the gap to the incumbent cannot be in a
        # cheaper answer: cost = LP bound + Σ reduced cost × bins, for covering rows.
        columns.drop_above(relaxed, cost(problem, incumbent) - relaxed.objective, len(incumbent))
    chosen = columns.integer()
    if chosen is None or cost(problem, chosen) >= cost(problem, incumbent) - _EPS:
        return list(incumbent)
    return chosen


def _dominance(problem: Problem, kind: int) -> tuple[int, ...]:
    """At most ``PRICING_TYPES`` types of ``kind`` worth pricing, the ones that hold the
    demand's mix for the least per unit first: none dearer than the cheapest type that holds
    everything (it can stand in for any of them), none that a cheaper-or-equal type beats on
    every resource (compared with the ``DOMINANCE_WINDOW`` nearest in price)."""
    everything = problem.load(kind, problem.demand)
    kept: list[int] = []
    for t in sorted(problem.kinds[kind].types, key=lambda t: (problem.types[t].price, t)):
        capacity = problem.types[t].capacity
        if not any(
            all(a >= b for a, b in zip(problem.types[k].capacity, capacity, strict=True))
            for k in kept[-DOMINANCE_WINDOW:]
        ):
            kept.append(t)
        if all(c >= n for c, n in zip(capacity, everything, strict=True)):
            break
    if len(kept) <= PRICING_TYPES:
        return tuple(kept)
    mix = [
        sum(d * size[r] for d, size in zip(problem.demand, problem.sizes, strict=True))
        for r in range(len(problem.types[kept[0]].capacity))
    ]

    def per_unit(t: int) -> tuple[float, int]:
        held = min(
            (c / m for c, m in zip(problem.types[t].capacity, mix, strict=True) if m > 0),
            default=0.0,
        )
        return (problem.types[t].price / held if held > 0 else float("inf"), t)

    return tuple(sorted(sorted(kept, key=per_unit)[:PRICING_TYPES]))


class _Columns:
    """Patterns found so far and the master programs over them."""

    def __init__(
        self, problem: Problem, pricing_types: list[tuple[int, ...]] | None = None
    ) -> None:
        self.problem = problem
        self.columns: list[tuple[int, int, tuple[int, ...]]] = []
        self._seen: set[tuple[int, int, tuple[int, ...]]] = set()
        self._lp: lp.Model | None = None
        groups = len(problem.demand)
        pinned = [i for i, k in enumerate(problem.kinds) if k.count]
        self._kind_rows = {kind: groups + n for n, kind in enumerate(pinned)}
        if pricing_types is None:
            pricing_types = [_dominance(problem, k) for k in range(len(problem.kinds))]
        # a kind with no type (a residual's used-up pinned kind) prices nothing
        self.pricing_types = [
            types if k.types else () for types, k in zip(pricing_types, problem.kinds, strict=True)
        ]

    def generate(self, rounds: int = ROUNDS) -> lp.Solution | None:
        """Seed, then price for at most ``rounds`` rounds; the last LP solved."""
        for kind in range(len(self.problem.kinds)):
            self.seed(kind)
        relaxed = None
        for _ in range(rounds):
            relaxed = self.relaxation()
            if relaxed is None or not self.price(relaxed.duals):
                break
        return relaxed

    def add(self, kind: int, type_: int, counts: tuple[int, ...]) -> bool:
        key = (kind, type_, counts)
        if key in self._seen or len(self.columns) >= MAX_COLUMNS:
            return False
        self._seen.add(key)
        self.columns.append(key)
        return True

    def seed(self, kind: int) -> None:
        """Start patterns: the base alone, each group alone as full as a type allows, and the
        whole demand's mix scaled down to what a type holds (balanced across resources)."""
        p = self.problem
        groups = len(p.demand)
        for t in self.pricing_types[kind]:
            room = _room(p, kind, t)
            self.add(kind, t, (0,) * groups)
            for g in range(groups):
                n = _fit_count(p.sizes[g], room, p.demand[g])
                if n:
                    counts = [0] * groups
                    counts[g] = n
                    self.add(kind, t, tuple(counts))
            mix = _scaled_mix(p, room)
            if any(mix):
                self.add(kind, t, mix)

    def _model(self, integer: bool) -> lp.Model:
        """The master over every pattern (the LP one grows with the patterns, never rebuilt)."""
        if integer or self._lp is None:
            p = self.problem
            lower = [float(d) for d in p.demand] + [float(k.count) for k in p.kinds if k.count]
            upper = [lp.INF] * len(p.demand) + [float(k.count) for k in p.kinds if k.count]
            model = lp.Model(lower, upper)
            if integer:
                for key in self.columns:
                    self._append(model, key, True)
                return model
            self._lp = model
        for key in self.columns[self._lp.columns :]:
            self._append(self._lp, key, False)
        return self._lp

    def _append(
        self, model: lp.Model, key: tuple[int, int, tuple[int, ...]], integer: bool
    ) -> None:
        kind, t, counts = key
        entries = [(g, float(n)) for g, n in enumerate(counts) if n]
        row = self._kind_rows.get(kind)
        if row is not None:
            entries.append((row, 1.0))
        model.add_column(self.problem.types[t].price, entries, integer=integer)

    def relaxation(self) -> lp.Solution | None:
        """The LP master: duals per group row, then per pinned kind row."""
        solution = lp.solve(self._model(False))
        return solution if solution.ok else None

    def drop_above(self, relaxed: lp.Solution, gap: float, keep_first: int) -> None:
        """Forget patterns whose reduced cost under ``relaxed``'s duals exceeds ``gap``, and
        keep at most ``MIP_COLUMNS`` (the first ``keep_first``, then the lowest reduced
        costs)."""
        p = self.problem
        groups = len(p.demand)
        rows = {k: groups + i for i, k in enumerate(i for i, k in enumerate(p.kinds) if k.count)}
        ranked = []
        for position, (kind, t, counts) in enumerate(self.columns):
            worth = sum(relaxed.duals[g] * n for g, n in enumerate(counts) if n)
            if kind in rows:
                worth += relaxed.duals[rows[kind]]
            reduced = p.types[t].price - worth
            if reduced <= gap + 1e-7 or position < keep_first:
                ranked.append((position >= keep_first, reduced, position))
        ranked.sort()
        self.columns = [self.columns[i] for _, _, i in ranked[:MIP_COLUMNS]]

    def price(self, duals: Sequence[float]) -> int:
        """Add patterns whose items are worth more than their type; how many were added.

        Every type gets a greedy fill; only the ``SEARCHED_TYPES`` types of each kind with the
        most value per dollar in reach get the bounded exact search as well.
        """
        p = self.problem
        groups = len(p.demand)
        values = [max(d, 0.0) for d in duals[:groups]]
        extra = iter(duals[groups:])
        order = sorted(range(groups), key=lambda g: (-values[g] / _weight(p, g), g))
        added = 0
        for kind, k in enumerate(p.kinds):
            kind_dual = next(extra) if k.count else 0.0
            ranked: list[tuple[float, int]] = []
            for t in self.pricing_types[kind]:
                room = _room(p, kind, t)
                counts, worth = _fill(p, values, room, order)
                gain = worth + kind_dual - p.types[t].price
                if gain > _EPS and self.add(kind, t, counts):
                    added += 1
                ranked.append((-(worth + kind_dual) / max(p.types[t].price, _EPS), t))
            for _, t in sorted(ranked)[:SEARCHED_TYPES]:
                for counts, worth in _knapsack(p, values, _room(p, kind, t)):
                    if worth + kind_dual > p.types[t].price + _EPS and self.add(kind, t, counts):
                        added += 1
        return added

    def integer(self) -> list[Bin] | None:
        """The cheapest choice of bins among the patterns (None: nothing usable)."""
        # No MIP start: HiGHS 1.16 maps a start through presolve wrongly and can stop at it.
        # The incumbent's patterns are columns, and ``pack`` keeps it when the MIP is no better.
        solution = lp.solve(self._model(True), integer=True, gap=MIP_GAP)
        if not solution.ok:
            return None
        bins: list[Bin] = []
        for i, value in enumerate(solution.values):
            kind, t, counts = self.columns[i]
            bins.extend(Bin(kind, t, counts) for _ in range(round(value)))
        return _trim(self.problem, bins) if _feasible(self.problem, bins) else None


def _residual(p: Problem, columns: _Columns, relaxed: lp.Solution) -> Problem | None:
    """The demand (and pinned bins) left once the LP's whole bins are taken (None: nothing)."""
    demand = list(p.demand)
    taken = [0] * len(p.kinds)
    for j, value in enumerate(relaxed.values):
        whole = int(value + 1e-6)
        if whole:
            kind, _, counts = columns.columns[j]
            taken[kind] += whole
            for g, n in enumerate(counts):
                demand[g] -= whole * n
    if all(d <= 0 for d in demand):
        return None
    kinds: list[Kind] = []
    for old, used in zip(p.kinds, taken, strict=True):
        left = old.count - used
        if not old.count or left > 0:
            kinds.append(Kind(old.base, left if old.count else 0, old.types))
        else:
            # a pinned kind with no bin left offers no type (count 0 alone would mean "free")
            kinds.append(Kind(old.base, 0, ()))
    return Problem(p.sizes, tuple(max(d, 0) for d in demand), p.types, tuple(kinds))


def _room(p: Problem, kind: int, t: int) -> tuple[int, ...]:
    base = p.kinds[kind].base
    return tuple(c - b for c, b in zip(p.types[t].capacity, base, strict=True))


def _scaled_mix(p: Problem, room: Sequence[int]) -> tuple[int, ...]:
    """The largest fraction of the demand (each group rounded down) that fits ``room``."""
    low = 1.0  # the fraction that fits before rounding down; rounding only frees room
    for r, space in enumerate(room):
        need = sum(d * size[r] for d, size in zip(p.demand, p.sizes, strict=True))
        if need > 0:
            low = min(low, max(space, 0) / need)
    high = min(1.0, 2 * low) if low < 1.0 else 1.0
    for _ in range(8):  # bisection for the rounding's extra room: 8 halvings suffice
        mid = (low + high) / 2
        if _fits(p, [int(mid * d) for d in p.demand], room):
            low = mid
        else:
            high = mid
    if _fits(p, list(p.demand), room):
        low = 1.0
    return tuple(int(low * d) for d in p.demand)


def _fits(p: Problem, counts: Sequence[int], room: Sequence[int]) -> bool:
    for r, space in enumerate(room):
        if sum(n * size[r] for n, size in zip(counts, p.sizes, strict=True)) > space:
            return False
    return True


def _weight(p: Problem, g: int) -> float:
    """An item's size relative to the largest type, summed over resources."""
    top = [max((t.capacity[r] for t in p.types), default=1) or 1 for r in range(len(p.sizes[g]))]
    return max(sum(s / c for s, c in zip(p.sizes[g], top, strict=True)), _EPS)


def _fit_count(size: Sequence[int], room: Sequence[int], limit: int) -> int:
    n = limit
    for s, r in zip(size, room, strict=True):
        if s > 0:
            n = min(n, r // s)
    return max(n, 0)


def _knapsack(
    p: Problem, values: Sequence[float], room: tuple[int, ...]
) -> list[tuple[tuple[int, ...], float]]:
    """The most valuable patterns for ``room`` that a bounded search finds, best first."""
    groups = [g for g in range(len(values)) if values[g] > _EPS]
    if not groups or any(r < 0 for r in room):
        return []
    scale = [max(r, 1) for r in room]
    weight = {g: sum(s / scale[r] for r, s in enumerate(p.sizes[g])) for g in groups}
    order = sorted(groups, key=lambda g: (-values[g] / max(weight[g], _EPS), g))
    search = _Search(p, values, order)
    search.offer(*_fill(p, values, room, order))
    search.run(0, list(room), [0] * len(values), 0.0)
    return search.found


class _Search:
    """Depth-first branch and bound over item counts, capped at ``KNAPSACK_NODES`` nodes."""

    def __init__(self, p: Problem, values: Sequence[float], order: Sequence[int]) -> None:
        self.p = p
        self.values = values
        self.order = order
        self.found: list[tuple[tuple[int, ...], float]] = []
        self.nodes = 0
        # per resource, the best value per unit among groups from position i on
        resources = len(p.sizes[0]) if p.sizes else 0
        self.ratio = [[0.0] * resources for _ in range(len(order) + 1)]
        for i in range(len(order) - 1, -1, -1):
            g = order[i]
            for r in range(resources):
                self.ratio[i][r] = max(self.ratio[i + 1][r], _per_unit(values[g], p.sizes[g][r]))

    @property
    def floor(self) -> float:
        """The worth a pattern must beat to be kept."""
        return self.found[-1][1] if len(self.found) == KEEP_PATTERNS else 0.0

    def offer(self, counts: Sequence[int], worth: float) -> None:
        """Keep ``counts`` if it is among the best patterns seen (ties: first seen)."""
        pattern = tuple(counts)
        if worth <= self.floor + _EPS or any(pattern == f for f, _ in self.found):
            return
        self.found.append((pattern, worth))
        self.found.sort(key=lambda f: -f[1])
        del self.found[KEEP_PATTERNS:]

    def run(self, i: int, left: list[int], counts: list[int], worth: float) -> None:
        self.nodes += 1
        self.offer(counts, worth)
        if i == len(self.order) or self.nodes > KNAPSACK_NODES:
            return
        bound = min(
            (ratio * room for ratio, room in zip(self.ratio[i], left, strict=True)),
            default=float("inf"),
        )
        if worth + bound <= self.floor + _EPS:
            return
        g = self.order[i]
        size = self.p.sizes[g]
        for n in range(_fit_count(size, left, self.p.demand[g]), -1, -1):
            counts[g] = n
            self.run(
                i + 1,
                [room - n * s for room, s in zip(left, size, strict=True)],
                counts,
                worth + n * self.values[g],
            )
        counts[g] = 0


def _per_unit(value: float, size: int) -> float:
    return value / size if size else float("inf")


def _fill(
    p: Problem, values: Sequence[float], room: Sequence[int], order: Sequence[int]
) -> tuple[tuple[int, ...], float]:
    left = list(room)
    counts = [0] * len(values)
    for g in order:
        n = _fit_count(p.sizes[g], left, p.demand[g])
        if n:
            counts[g] = n
            for r, s in enumerate(p.sizes[g]):
                left[r] -= n * s
    return tuple(counts), sum(values[g] * n for g, n in enumerate(counts))


def _feasible(p: Problem, bins: Sequence[Bin]) -> bool:
    covered = [0] * len(p.demand)
    per_kind = [0] * len(p.kinds)
    for b in bins:
        per_kind[b.kind] += 1
        for g, n in enumerate(b.counts):
            covered[g] += n
    return all(c >= d for c, d in zip(covered, p.demand, strict=True)) and all(
        not k.count or per_kind[i] == k.count for i, k in enumerate(p.kinds)
    )


def _trim(p: Problem, bins: list[Bin]) -> list[Bin]:
    """Remove items covered twice (from the last bins first), then retype and drop empties."""
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
        t = p.cheapest(b.kind, counts)
        out.append(Bin(b.kind, b.type if t is None else t, tuple(counts)))
    out.reverse()
    return out
