"""Column generation for the packing: the patterns found so far and the LP master over them.

A column is a pattern (how many items of each group one bin holds) on a kind and type of bin,
kept at the cheapest type that holds it. The master LP (one HiGHS instance, warm-started)
chooses how many bins of each pattern cover the demand, with each pinned kind's count as a row;
its duals price the items, and pricing (greedy fills of every pricing type at once, ``fills``;
then ``pricing``'s bounded search on the types with most value per dollar in reach) proposes
patterns worth more than their type. Diving (``diving``) fixes bins through ``shift``; what the
fixed bins leave uncovered is what pricing fills. Every step is charged to a ``work.Budget``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from karpenter.core.provisioning import bintypes, fills, lp, pricing, work
from karpenter.core.provisioning.packing import Column, Problem

MAX_COLUMNS = 3000
SEARCH_NODES = 200  # nodes of one bounded pricing search
KEEP_PATTERNS = 3  # patterns one search hands back
SEARCHED_TYPES = 8  # types per pricing round that get the bounded search
SETTLED = 0.003  # no pattern beats its price by more than this: the LP is settled
_EPS = 1e-9


class Engine:
    """Patterns found so far, the LP master over them, and the bins fixed by diving."""

    def __init__(self, problem: Problem, budget: work.Budget) -> None:
        self.p = problem
        self.budget = budget
        groups = len(problem.demand)
        pinned = [i for i, k in enumerate(problem.kinds) if k.count]
        self.kind_rows = {kind: groups + n for n, kind in enumerate(pinned)}
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
        self._capacities: list[fills.Matrix] = []  # per kind, ``fitting``'s capacities
        self._room_rows: dict[tuple[int, tuple[int, ...]], fills.Matrix] = {}  # ``_rooms``
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
            self._capacities.append(
                fills.matrix([capacities[t] for t in types], len(problem.kinds[k].base))
            )
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
        key = (kind, self.cheapest(kind, counts, type_), counts)
        if key in self._seen or len(self.columns) >= MAX_COLUMNS:
            return False
        self._seen[key] = len(self.columns)
        self.columns.append(key)
        self.fixed.append(0)
        self._pending += 1
        return True

    def column(self, kind: int, type_: int, counts: tuple[int, ...]) -> int:
        """The index of a pattern at the cheapest type that holds it, remembered if new
        (diving's clipped patterns: past the column limit too)."""
        key = (kind, self.cheapest(kind, counts, type_), counts)
        j = self._seen.get(key)
        if j is None:
            j = self._seen[key] = len(self.columns)
            self.columns.append(key)
            self.fixed.append(0)
            self._pending += 1
        return j

    def cheapest(self, kind: int, counts: Sequence[int], fallback: int) -> int:
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
        found = fills.first_holder(self._capacities[kind], self.p.load(kind, counts))
        return self.fitting[kind][found] if found >= 0 else -1

    def seed(self) -> None:
        """Start patterns: the base alone, each group alone as full as a type allows, and the
        whole demand's mix scaled down to what a type holds (balanced across resources)."""
        p = self.p
        groups = len(p.demand)
        for kind in range(len(p.kinds)):
            types = self.pricing[kind]
            singles = fills.singles(p.sizes, p.demand, self._rooms(kind, types)).tolist()
            # a single-group pattern met again on a dearer type is the same column (it is
            # kept at the cheapest type that holds it): skip it before building it
            seen: set[tuple[int, int]] = set()
            for t, counts in zip(types, singles, strict=True):
                room = p.room(kind, t)
                self.add(kind, t, (0,) * groups)
                for g, n in enumerate(counts):
                    if n and (g, n) not in seen:
                        seen.add((g, n))
                        self.add(kind, t, tuple(n if h == g else 0 for h in range(groups)))
                mix = pricing.scaled_mix(p.sizes, p.demand, room)
                if any(mix):
                    self.add(kind, t, mix)

    def solve(self) -> lp.Solution | None:
        """The LP master over every pattern, with the fixed bins as lower bounds (None:
        infeasible, or the budget ran out first)."""
        if self.budget.exhausted:
            return None
        self.flush()
        solution = self.master.solve(self.budget.left)
        self.budget.charge(solution.work)
        return solution if solution.ok else None

    def flush(self) -> None:
        """Put the patterns found since the last solve into the master."""
        if self._pending:
            new = self.columns[len(self.columns) - self._pending :]
            self.master.add_columns(
                [self.p.types[t].price for _, t, _ in new], [self.entries(c) for c in new]
            )
            self._pending = 0

    def entries(self, column: Column) -> list[tuple[int, float]]:
        kind, _, counts = column
        entries = [(g, float(n)) for g, n in enumerate(counts) if n]
        row = self.kind_rows.get(kind)
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

        Every pricing type gets a greedy fill; then the ``searched`` types with the most
        value per dollar in reach get the bounded search.
        """
        p = self.p
        groups = len(p.demand)
        values = [max(d, 0.0) if self.demand[g] > 0 else 0.0 for g, d in enumerate(duals[:groups])]
        self.ratio = 0.0
        ranked: list[tuple[float, int, int]] = []
        added = 0
        for kind, k in enumerate(p.kinds):
            if not k.count or self.left[kind]:
                added += self._greedy(kind, duals, values, types[kind], slack, ranked)
        for _, kind, t in sorted(ranked)[:searched]:
            added += self._search(kind, t, duals, values, slack)
        return added

    def _greedy(
        self,
        kind: int,
        duals: Sequence[float],
        values: Sequence[float],
        types: Sequence[int],
        slack: float,
        ranked: list[tuple[float, int, int]],
    ) -> int:
        """Greedy fills of ``kind`` on ``types`` (one unit each, as the budget allows): add
        those that pay, rank every type by value per dollar; how many were added."""
        p = self.p
        kind_dual = duals[self.kind_rows[kind]] if p.kinds[kind].count else 0.0
        order = sorted(range(len(p.demand)), key=lambda g: (-values[g] / self.weight[g], g))
        chosen = tuple(types[: self.budget.left])
        self.budget.charge(len(chosen))
        filled, worths = fills.fill(p.sizes, self.demand, values, self._rooms(kind, chosen), order)
        added = 0
        for row, (t, worth) in enumerate(zip(chosen, worths, strict=True)):
            price = p.types[t].price
            if worth + kind_dual > price - slack + _EPS and self.add(
                kind, t, tuple(filled[row].tolist())
            ):
                added += 1
            ranked.append((-(worth + kind_dual) / max(price, _EPS), kind, t))
            self.ratio = max(self.ratio, (worth + kind_dual) / max(price, _EPS))
        return added

    def _search(
        self, kind: int, t: int, duals: Sequence[float], values: Sequence[float], slack: float
    ) -> int:
        """The bounded search's best patterns of ``kind`` on ``t``: add those that pay."""
        p = self.p
        kind_dual = duals[self.kind_rows[kind]] if p.kinds[kind].count else 0.0
        nodes = min(SEARCH_NODES, self.budget.left)
        found, used = pricing.search(
            p.sizes, self.demand, values, p.room(kind, t), nodes, KEEP_PATTERNS
        )
        self.budget.charge(used)
        added = 0
        for counts, worth in found:
            self.ratio = max(self.ratio, (worth + kind_dual) / max(p.types[t].price, _EPS))
            if worth + kind_dual > p.types[t].price - slack + _EPS and self.add(kind, t, counts):
                added += 1
        return added

    def _rooms(self, kind: int, types: tuple[int, ...]) -> fills.Matrix:
        """The room of a bin of ``kind`` on each of ``types``, one row per type."""
        key = (kind, types)
        rooms = self._room_rows.get(key)
        if rooms is None:
            rows = [self.p.room(kind, t) for t in types]
            rooms = self._room_rows[key] = fills.matrix(rows, len(self.p.kinds[kind].base))
        return rooms

    def shift(self, j: int, covered: tuple[int, ...], step: int) -> None:
        """Fix ``step`` more bins of column ``j`` (covering ``covered``; -1 undoes one)."""
        kind = self.columns[j][0]
        self.fixed[j] += step
        self.master.set_lower(j, float(self.fixed[j]))
        for g, c in enumerate(covered):
            if c:
                self.demand[g] -= step * c
        if self.p.kinds[kind].count:
            self.left[kind] -= step
