"""Variable-size bin packing over instance types: which bins of which types hold which items.

Items come in groups of equal size (a resource vector per group, with a demand); bins have a
type (price, capacity) and a kind: free bins may be opened in any number, while a pinned kind
stands for ``count`` bins that must exist and already hold ``base`` (pods that may not move).
A bin's *pattern* is how many items of each group it holds.

The method is cutting-stock column generation with diving. An LP over known patterns (kept in
one HiGHS instance, warm-started) gives dual prices per item; pricing (``pricing``) proposes
patterns worth more than their type; this repeats a bounded number of rounds. Diving then
turns the LP into whole bins: every pattern the LP uses at least once is fixed that many
times, else the most-used fractional one is rounded up, and the LP is re-solved (and re-priced
for what is left) until it is integral; a local search then merges bins. The incumbent (the
first pass's own packing) is among the patterns and is kept whenever nothing cheaper is found,
so the answer is never dearer than it. Work is bounded by counts (rounds, patterns, search
nodes, simplex iterations, dives), never by time, and charged to a ``work.Budget``: once it is
spent no further step starts, a dive under way is finished by rounding its LP up, and the
cheapest valid packing found so far (at worst the incumbent) is the answer.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.provisioning import bintypes, lp, pricing, work

ROUNDS = 20  # pricing rounds before diving
TAIL_ROUNDS = 1  # pricing rounds over every fitting type once the LP has settled
DIVE_ROUNDS = 2  # pricing rounds after each dive, for the first PRICED_DIVES dives
PRICED_DIVES = 20
DIVE_SEARCHED = 8
MAX_COLUMNS = 3000
SEARCH_NODES = 200
KEEP_PATTERNS = 3
SEARCHED_TYPES = 8
MIP_COLUMNS = 80
MIP_NODES = 200
MIP_GAP = 0.002
# Work units that must be left for the integer program to start: HiGHS caps its nodes but not
# the sum of its LPs' iterations, so it runs only with room for the most any bench class took
# (about 1,300 units: ≤ MIP_COLUMNS columns, ≤ MIP_NODES nodes, no sub-MIP heuristics).
MIP_RESERVE = 2_500
GREEDY_FIRST = 0
SETTLED = 0.003
STRONG = 8  # fractional patterns tried before rounding one up
_EPS = 1e-9
_INT = 1e-6  # an LP value within this of an integer is that integer

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
    engine = _Engine(problem, budget)
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
    dived = engine.dive(root, cost(problem, incumbent))
    best = _cheaper(problem, list(incumbent), engine.improve(engine.trim(dived or [])))
    candidates = engine.candidates(root, cost(problem, best))
    if cost(problem, best) > root.objective * (1 + MIP_GAP) and budget.left >= MIP_RESERVE:
        best = _cheaper(problem, best, engine.integer(candidates, cost(problem, best)) or [])
    kept = dict.fromkeys([*((b.kind, b.type, b.counts) for b in best), *candidates])
    return Packed(best, tuple(kept), root.objective)


def _cheaper(problem: Problem, best: list[Bin], other: list[Bin]) -> list[Bin]:
    """``other`` when it is a valid packing cheaper than ``best``, else ``best``."""
    if other and feasible(problem, other) and cost(problem, other) < cost(problem, best) - _EPS:
        return other
    return best


class _Engine:
    """Patterns found so far, the LP master over them, and the bins fixed by diving."""

    def __init__(self, problem: Problem, budget: work.Budget) -> None:
        self.p = problem
        self.budget = budget
        groups = len(problem.demand)
        pinned = [i for i, k in enumerate(problem.kinds) if k.count]
        self._kind_rows = {kind: groups + n for n, kind in enumerate(pinned)}
        lower = [float(d) for d in problem.demand] + [float(problem.kinds[k].count) for k in pinned]
        upper = [lp.INF] * groups + [float(problem.kinds[k].count) for k in pinned]
        self.master = lp.Master(lower, upper)
        self.columns: list[Column] = []
        self._seen: dict[Column, int] = {}
        self._pending = 0  # columns not yet in the master
        self.fixed: list[int] = []  # per column, bins fixed by diving (its lower bound)
        self.demand = list(problem.demand)  # what the fixed bins leave uncovered
        self.left = [k.count for k in problem.kinds]  # pinned bins not yet fixed
        self.fitting: list[tuple[int, ...]] = []  # per kind, cheapest first (``bintypes``)
        self._capacities: list[tuple[tuple[int, tuple[int, ...]], ...]] = []  # the same
        self._positions: list[dict[int, int]] = []  # per kind, type -> place in ``fitting``
        self._holders: dict[tuple[int, tuple[int, ...]], int] = {}  # ``_first_holder``'s
        self.pricing: list[tuple[int, ...]] = []
        prices = [t.price for t in problem.types]
        capacities = [t.capacity for t in problem.types]
        mix = problem.load(0, problem.demand)
        for k, kind in enumerate(problem.kinds):
            everything = problem.load(k, problem.demand)
            types = bintypes.fitting(prices, capacities, kind.types, everything)
            rooms = {t: problem.room(k, t) for t in types}
            self.fitting.append(types)
            self._capacities.append(tuple((t, problem.types[t].capacity) for t in types))
            self._positions.append({t: n for n, t in enumerate(types)})
            self.pricing.append(
                bintypes.pricing(prices, rooms, types, problem.sizes, mix, not kind.count)
            )
        # wide pricing: every fitting type for free bins; pinned kinds (up to 8, each priced
        # over all its types otherwise) keep their pricing types
        self.wide = [
            self.fitting[k] if not kind.count else self.pricing[k]
            for k, kind in enumerate(problem.kinds)
        ]
        top = [max(t.capacity[r] for t in problem.types) for r in range(len(problem.sizes[0]))]
        self.weight = pricing.weights(problem.sizes, top)
        # the best value-to-price ratio the last pricing round saw (Farley: the LP is within
        # a factor of it of the full LP, had pricing been exact)
        self.ratio = math.inf

    def add(self, kind: int, type_: int, counts: tuple[int, ...]) -> bool:
        """Remember a pattern at the cheapest pricing type that holds it (False: known
        already, or the column limit is reached)."""
        key = (kind, self._cheapest(kind, counts, type_), counts)
        if key in self._seen or len(self.columns) >= MAX_COLUMNS:
            return False
        self._seen[key] = len(self.columns)
        self.columns.append(key)
        self.fixed.append(0)
        self._pending += 1
        return True

    def _cheapest(self, kind: int, counts: Sequence[int], fallback: int) -> int:
        """The first of ``kind``'s fitting types (cheapest first) that holds ``counts``; the
        scan ends at ``fallback`` (the type the pattern was found for, which holds it)."""
        key = (kind, tuple(counts))
        holder = self._holders.get(key)
        if holder is None:
            # seeding and pricing meet the same patterns on many types: scan each once
            holder = self._holders[key] = self._first_holder(kind, key[1])
        if holder < 0:
            return fallback
        position = self._positions[kind]
        if position.get(fallback, len(position)) < position[holder]:
            return fallback  # the scan would have stopped at ``fallback`` first
        return holder

    def _first_holder(self, kind: int, counts: Sequence[int]) -> int:
        """The first of ``kind``'s fitting types (cheapest first) that holds ``counts`` (-1:
        none)."""
        need = self.p.load(kind, counts)
        le = operator.le
        for t, capacity in self._capacities[kind]:
            if all(map(le, need, capacity)):
                return t
        return -1

    def trim(self, bins: Sequence[Bin]) -> list[Bin]:
        """Remove items covered twice (from the last bins first), then retype each bin to the
        cheapest type that holds it and drop free bins left empty."""
        p = self.p
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
            out.append(Bin(b.kind, self._cheapest(b.kind, counts, b.type), tuple(counts)))
        out.reverse()
        return out

    def improve(self, bins: Sequence[Bin]) -> list[Bin]:
        """Merge two bins into one cheaper bin while any such pair exists (a free bin's items
        may join any bin; two pinned bins never merge)."""
        p = self.p
        bins = list(bins)
        merged = True
        while merged:
            merged = False
            for i, j in ((i, j) for i in range(len(bins)) for j in range(len(bins))):
                a, b = bins[i], bins[j]
                if i == j or p.kinds[b.kind].count:
                    continue
                counts = tuple(x + y for x, y in zip(a.counts, b.counts, strict=True))
                t = self._cheapest(a.kind, counts, -1)
                pair = p.types[a.type].price + p.types[b.type].price
                if t >= 0 and p.types[t].price < pair - _EPS:
                    bins[i] = Bin(a.kind, t, counts)
                    del bins[j]
                    merged = True
                    break
        return bins

    def seed(self) -> None:
        """Start patterns: the base alone, each group alone as full as a type allows, and the
        whole demand's mix scaled down to what a type holds (balanced across resources)."""
        p = self.p
        groups = len(p.demand)
        for kind in range(len(p.kinds)):
            for t in self.pricing[kind]:
                room = p.room(kind, t)
                self.add(kind, t, (0,) * groups)
                for g in range(groups):
                    n = pricing.fit_count(p.sizes[g], room, p.demand[g])
                    if n:
                        self.add(kind, t, tuple(n if h == g else 0 for h in range(groups)))
                mix = pricing.scaled_mix(p.sizes, p.demand, room)
                if any(mix):
                    self.add(kind, t, mix)

    def solve(self) -> lp.Solution | None:
        """The LP master over every pattern, with the fixed bins as lower bounds (None:
        infeasible, or the budget ran out first)."""
        if self.budget.exhausted:
            return None
        self._flush()
        solution = self.master.solve(self.budget.left)
        self.budget.charge(solution.work)
        return solution if solution.ok else None

    def _flush(self) -> None:
        """Put the patterns found since the last solve into the master."""
        if self._pending:
            new = self.columns[len(self.columns) - self._pending :]
            self.master.add_columns(
                [self.p.types[t].price for _, t, _ in new], [self._entries(c) for c in new]
            )
            self._pending = 0

    def _entries(self, column: Column) -> list[tuple[int, float]]:
        kind, _, counts = column
        entries = [(g, float(n)) for g, n in enumerate(counts) if n]
        row = self._kind_rows.get(kind)
        if row is not None:
            entries.append((row, 1.0))
        return entries

    def generate(
        self, rounds: int, wide: bool = False, slack: float = 0.0, searched: int = SEARCHED_TYPES
    ) -> lp.Solution | None:
        """Solve, then price (over every fitting type when ``wide``, keeping patterns within
        ``slack`` of paying) and re-solve for at most ``rounds`` rounds; the last LP solved
        (new patterns only add columns, so it stays valid when the budget stops a re-solve)."""
        relaxed = self.solve()
        types = self.wide if wide else self.pricing
        for _ in range(rounds):
            if relaxed is None or not self.price(relaxed.duals, types, slack, searched):
                break
            solved = self.solve()
            if solved is None:
                break
            relaxed = solved
            if not slack and self.ratio <= 1 + SETTLED:
                break  # no pattern beats its price by more than SETTLED: the LP is settled
        return relaxed

    def price(
        self,
        duals: Sequence[float],
        types: Sequence[Sequence[int]],
        slack: float = 0.0,
        searched: int = SEARCHED_TYPES,
    ) -> int:
        """Add patterns for what is left whose items are worth more than their type; how many.

        Every pricing type gets a greedy fill; only when no greedy pattern pays do the
        ``SEARCHED_TYPES`` types of each kind with the most value per dollar in reach get the
        bounded search.
        """
        p = self.p
        groups = len(p.demand)
        values = [max(d, 0.0) if self.demand[g] > 0 else 0.0 for g, d in enumerate(duals[:groups])]
        order = sorted(range(groups), key=lambda g: (-values[g] / self.weight[g], g))
        added = 0
        self.ratio = 0.0
        ranked: list[tuple[float, int, int]] = []
        for kind, k in enumerate(p.kinds):
            if k.count and not self.left[kind]:
                continue
            kind_dual = duals[self._kind_rows[kind]] if k.count else 0.0
            for t in types[kind]:
                if self.budget.exhausted:
                    break
                self.budget.charge(1)  # a greedy fill: one unit
                counts, worth = pricing.fill(p.sizes, self.demand, values, p.room(kind, t), order)
                price = p.types[t].price
                if worth + kind_dual > price - slack + _EPS and self.add(kind, t, counts):
                    added += 1
                ranked.append((-(worth + kind_dual) / max(price, _EPS), kind, t))
                self.ratio = max(self.ratio, (worth + kind_dual) / max(price, _EPS))
        if added and GREEDY_FIRST:
            searched = min(searched, GREEDY_FIRST)
        for _, kind, t in sorted(ranked)[:searched]:
            kind_dual = duals[self._kind_rows[kind]] if p.kinds[kind].count else 0.0
            nodes = min(SEARCH_NODES, self.budget.left)
            found, used = pricing.search(
                p.sizes, self.demand, values, p.room(kind, t), nodes, KEEP_PATTERNS
            )
            self.budget.charge(used)
            for counts, worth in found:
                self.ratio = max(self.ratio, (worth + kind_dual) / max(p.types[t].price, _EPS))
                if worth + kind_dual > p.types[t].price - slack + _EPS and self.add(
                    kind, t, counts
                ):
                    added += 1
        return added

    def candidates(self, relaxed: lp.Solution, cutoff: float) -> list[Column]:
        """At most ``MIP_COLUMNS`` patterns that a packing cheaper than ``cutoff`` may use,
        lowest reduced cost (under ``relaxed``'s duals) first: a pattern whose reduced cost
        exceeds the gap to ``cutoff`` cannot be in one (cost = LP + Σ reduced cost × bins)."""
        p = self.p
        gap = cutoff - relaxed.objective
        ranked = []
        for j, (kind, t, counts) in enumerate(self.columns):
            worth = sum(relaxed.duals[g] * n for g, n in enumerate(counts) if n)
            row = self._kind_rows.get(kind)
            if row is not None:
                worth += relaxed.duals[row]
            reduced = p.types[t].price - worth
            if reduced <= gap + 1e-7:
                ranked.append((reduced, j))
        ranked.sort()
        return [self.columns[j] for _, j in ranked[:MIP_COLUMNS]]

    def integer(self, chosen: Sequence[Column], cutoff: float) -> list[Bin] | None:
        """The cheapest choice of bins among ``chosen``, cheaper than ``cutoff`` (None: none
        found within the node limit)."""
        p = self.p
        groups = len(p.demand)
        lower = [float(d) for d in p.demand] + [float(p.kinds[k].count) for k in self._kind_rows]
        upper = [lp.INF] * groups + [float(p.kinds[k].count) for k in self._kind_rows]
        model = lp.Model(lower, upper)
        for column in chosen:
            model.add_column(p.types[column[1]].price, self._entries(column), integer=True)
        solution = lp.solve(
            model,
            integer=True,
            gap=MIP_GAP,
            node_limit=MIP_NODES,
            cutoff=cutoff - _EPS,
            lean=True,
            iterations=self.budget.left,
        )
        self.budget.charge(solution.work)
        if not solution.ok:
            return None
        bins: list[Bin] = []
        for (kind, t, counts), value in zip(chosen, solution.values, strict=True):
            bins.extend(Bin(kind, t, counts) for _ in range(round(value)))
        return self.improve(self.trim(bins)) if feasible(p, bins) else None

    def dive(self, relaxed: lp.Solution, cutoff: float) -> list[Bin] | None:
        """Whole bins from the LP: fix what it uses whole, round up its most-used fraction,
        re-solve (and re-price, for the first dives) until it is integral (None: the LP
        reached ``cutoff``, so this dive cannot end cheaper than that). When the budget runs
        out the dive ends at once: every fraction of the last LP rounded up."""
        dives = 0
        while True:
            if self.budget.exhausted:
                return self._bins(relaxed.values)
            if not self._round(relaxed.values):
                break
            dives += 1
            rounds = DIVE_ROUNDS if dives <= PRICED_DIVES else 0
            solved = self.generate(rounds, wide=True, searched=DIVE_SEARCHED)
            if solved is None and self.budget.exhausted:
                return self._bins(relaxed.values)
            if solved is None or solved.objective >= cutoff - _EPS:
                return None
            relaxed = solved
        return self._bins(())

    def _bins(self, values: Sequence[float]) -> list[Bin]:
        """The fixed bins, each column raised to its LP value in ``values`` rounded up (an LP
        answer covers the demand, so its rounding up does too)."""
        bins: list[Bin] = []
        for j, (kind, t, counts) in enumerate(self.columns):
            n = self.fixed[j]
            if j < len(values):
                n = max(n, math.ceil(values[j] - _INT))
            bins.extend(Bin(kind, t, counts) for _ in range(n))
        return bins

    def _round(self, values: Sequence[float]) -> bool:
        """Open bins toward ``values``; False when the fixed bins already match (integral).

        Every pattern used at least once more than fixed is fixed that many more times; when
        none is, the fractional pattern whose rounding up costs the LP least (among the
        ``STRONG`` most used) is opened once.
        """
        whole: list[tuple[int, int]] = []
        fractional: list[tuple[float, int]] = []
        for j, x in enumerate(values):
            n = int(x + _INT)
            if n > self.fixed[j]:
                whole.append((j, n - self.fixed[j]))
            elif x - self.fixed[j] > _INT:
                fractional.append((self.fixed[j] - x, j))
        for j, n in whole:
            for _ in range(n):
                self._open(j)
        if whole or not fractional:
            return bool(whole)
        fractional.sort()
        best: tuple[float, int] | None = None
        for _, j in fractional[:STRONG] if len(fractional) > 1 else ():
            opened = self._open(j)
            solved = self.solve()
            self._close(opened)
            value = solved.objective if solved is not None else lp.INF
            if best is None or value < best[0] - _EPS:
                best = (value, j)
        self._open(fractional[0][1] if best is None else best[1])
        return True

    def _open(self, j: int) -> tuple[int, tuple[int, ...]]:
        """Fix one more bin of column ``j``'s pattern, less what is already covered, at the
        cheapest type that holds the rest (a column of its own when that differs); the
        column fixed and the items it covers."""
        kind, t, counts = self.columns[j]
        clipped = tuple(min(c, d) for c, d in zip(counts, self.demand, strict=True))
        if clipped != counts:
            key = (kind, self._cheapest(kind, clipped, t), clipped)
            if key not in self._seen:
                self._seen[key] = len(self.columns)
                self.columns.append(key)
                self.fixed.append(0)
                self._pending += 1
            j = self._seen[key]
        self._flush()
        self._shift(j, clipped, 1)
        return j, clipped

    def _close(self, opened: tuple[int, tuple[int, ...]]) -> None:
        """Undo one ``_open``."""
        self._shift(*opened, -1)

    def _shift(self, j: int, covered: tuple[int, ...], step: int) -> None:
        kind = self.columns[j][0]
        self.fixed[j] += step
        self.master.set_lower(j, float(self.fixed[j]))
        for g, c in enumerate(covered):
            if c:
                self.demand[g] -= step * c
        if self.p.kinds[kind].count:
            self.left[kind] -= step


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
