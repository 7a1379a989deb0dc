"""What one class's packing hands to the next: answers and patterns shared within a pass.

The zones of a zonal spread usually pose near-identical packing problems: the same pod shapes,
counts within one of each other, mostly the same instance types. A problem seen before (same
problem, same incumbent) gets the same answer without solving; otherwise the patterns the last
similar problem found useful (its bins and the candidates of its integer program) are fitted
to this one and join its seed patterns, so it converges in a round or two instead of
rediscovering them. Each answer is then improved by ``neighbours`` (a few bins at a time).
Patterns travel in catalog terms (instance type by catalog index, item groups by size, pinned
kinds by their base) and are cut down to what this problem allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from karpenter.core.provisioning import neighbours, packing, work

# (kind base, catalog index of the type, ((item size, count), ...))
Pattern = tuple[tuple[int, ...], int, tuple[tuple[tuple[int, ...], int], ...]]


@dataclass(slots=True)
class Memory:
    """Answers by problem, and the latest useful patterns by family of problems."""

    budget: work.Budget = field(default_factory=work.Budget)  # the whole pass's work
    solved: dict[tuple[object, ...], list[packing.Bin]] = field(default_factory=dict)
    pools: dict[tuple[object, ...], tuple[Pattern, ...]] = field(default_factory=dict)

    def pack(
        self,
        family: tuple[object, ...],
        problem: packing.Problem,
        incumbent: Sequence[packing.Bin],
        catalog: Sequence[int],
    ) -> list[packing.Bin]:
        """``packing.pack`` of ``problem`` (``catalog``: catalog index per problem type),
        helped by the last problem of the same ``family`` (NodePool and resources), its work
        charged to the pass's budget (an answer cut short by it is not remembered)."""
        key = (problem, tuple(incumbent))
        bins = self.solved.get(key)
        if bins is None:
            hints = fit(self.pools.get(family, ()), problem, catalog)
            packed = packing.pack(problem, incumbent, hints, self.budget)
            bins = neighbours.improve(problem, packed, self.budget)
            if not self.budget.exhausted:
                self.solved[key] = bins
            if packed.patterns and not self.budget.exhausted:
                self.pools[family] = export(packed.patterns, problem, catalog)
        return bins


def export(
    columns: Sequence[packing.Column], problem: packing.Problem, catalog: Sequence[int]
) -> tuple[Pattern, ...]:
    """``columns`` in catalog terms."""
    out = []
    for kind, t, counts in columns:
        items = tuple((problem.sizes[g], n) for g, n in enumerate(counts) if n)
        out.append((problem.kinds[kind].base, catalog[t], items))
    return tuple(out)


def fit(
    patterns: Sequence[Pattern], problem: packing.Problem, catalog: Sequence[int]
) -> list[packing.Column]:
    """``patterns`` as columns of ``problem``: kinds by base, types by catalog index, items by
    size, each count cut to the demand; a pattern whose kind or type this problem lacks, or
    that keeps no item of a free kind, is left out."""
    kinds: dict[tuple[int, ...], int] = {}
    for k in range(len(problem.kinds) - 1, -1, -1):
        kinds[problem.kinds[k].base] = k  # the first kind of a base wins
    allowed = [frozenset(kind.types) for kind in problem.kinds]
    position = {c: t for t, c in enumerate(catalog)}
    group = {size: g for g, size in enumerate(problem.sizes)}
    out: list[packing.Column] = []
    for base, index, items in patterns:
        kind = kinds.get(base)
        t = position.get(index)
        if kind is None or t is None or t not in allowed[kind]:
            continue
        counts = [0] * len(problem.demand)
        for size, n in items:
            g = group.get(size)
            if g is not None:
                counts[g] = min(n, problem.demand[g])
        if any(counts) or problem.kinds[kind].count:
            out.append((kind, t, tuple(counts)))
    return out
