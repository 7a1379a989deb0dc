"""Pricing for column generation: the patterns a bin's room holds that are worth the most.

A pattern is how many items of each group one bin holds. Given a value per item (the LP's
dual prices), pricing looks for patterns whose items are worth more than the bin costs: a
greedy fill in order of value per unit of size, and a depth-first branch and bound capped at a
number of nodes (a multi-dimensional bounded knapsack; exact when the cap is not reached).
Everything here works on plain tuples: sizes per group, room per resource, a limit per group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_EPS = 1e-9

Counts = tuple[int, ...]


def fit_count(size: Sequence[int], room: Sequence[int], limit: int) -> int:
    """How many items of ``size`` fit ``room``, at most ``limit``."""
    n = limit
    for s, r in zip(size, room, strict=True):
        if s > 0:
            q = r // s
            if q < n:  # noqa: PLR1730 - pricing's innermost loop; min() costs a call
                n = q
    return n if n > 0 else 0


def fits(sizes: Sequence[Sequence[int]], counts: Sequence[int], room: Sequence[int]) -> bool:
    """Whether ``counts`` items of each group fit ``room`` together."""
    for r, space in enumerate(room):
        if sum(n * size[r] for n, size in zip(counts, sizes, strict=True) if n) > space:
            return False
    return True


def weights(sizes: Sequence[Sequence[int]], top: Sequence[int]) -> list[float]:
    """Each group's size relative to ``top`` (the largest room per resource), summed."""
    scale = [max(t, 1) for t in top]
    return [max(sum(s / c for s, c in zip(size, scale, strict=True)), _EPS) for size in sizes]


def fill(
    sizes: Sequence[Sequence[int]],
    limits: Sequence[int],
    values: Sequence[float],
    room: Sequence[int],
    order: Sequence[int],
) -> tuple[Counts, float]:
    """Greedy: take as many items of each group in ``order`` as still fit; the pattern and its
    worth."""
    left = list(room)
    counts = [0] * len(sizes)
    worth = 0.0
    for g in order:
        size = sizes[g]
        n = fit_count(size, left, limits[g])
        if n:
            counts[g] = n
            worth += n * values[g]
            for r, s in enumerate(size):
                left[r] -= n * s
    return tuple(counts), worth


def scaled_mix(
    sizes: Sequence[Sequence[int]], demand: Sequence[int], room: Sequence[int]
) -> Counts:
    """The largest fraction of ``demand`` (each group rounded down) that fits ``room``."""
    low = 1.0  # the fraction that fits before rounding down; rounding only frees room
    for r, space in enumerate(room):
        need = sum(d * size[r] for d, size in zip(demand, sizes, strict=True))
        if need > 0:
            low = min(low, max(space, 0) / need)
    high = min(1.0, 2 * low) if low < 1.0 else 1.0
    for _ in range(8):  # bisection for the rounding's extra room: 8 halvings suffice
        mid = (low + high) / 2
        if fits(sizes, [int(mid * d) for d in demand], room):
            low = mid
        else:
            high = mid
    if fits(sizes, demand, room):
        low = 1.0
    return tuple(int(low * d) for d in demand)


def search(
    sizes: Sequence[Sequence[int]],
    limits: Sequence[int],
    values: Sequence[float],
    room: Sequence[int],
    nodes: int,
    keep: int,
) -> tuple[list[tuple[Counts, float]], int]:
    """The ``keep`` most valuable patterns for ``room`` that a branch and bound of at most
    ``nodes`` nodes finds, best first (the greedy fill among them), and the nodes it used."""
    groups = [g for g, v in enumerate(values) if v > _EPS and limits[g] > 0]
    if not groups or any(r < 0 for r in room) or nodes <= 0:
        return [], 0
    scale = [max(r, 1) for r in room]
    weight = {g: sum(s / scale[r] for r, s in enumerate(sizes[g])) for g in groups}
    order = sorted(groups, key=lambda g: (-values[g] / max(weight[g], _EPS), g))
    bnb = _Search(sizes, limits, values, order, nodes, keep)
    bnb.offer(*fill(sizes, limits, values, room, order))
    bnb.run(0, list(room), [0] * len(sizes), 0.0)
    return bnb.found, nodes - max(bnb.nodes, 0)


class _Search:
    """Depth-first branch and bound over item counts, capped at ``nodes`` nodes."""

    def __init__(
        self,
        sizes: Sequence[Sequence[int]],
        limits: Sequence[int],
        values: Sequence[float],
        order: Sequence[int],
        nodes: int,
        keep: int,
    ) -> None:
        self.sizes = [tuple(sizes[g]) for g in order]  # by position in ``order``
        self.limits = [limits[g] for g in order]
        self.values = [values[g] for g in order]
        self.order = order
        self.nodes = nodes
        self.keep = keep
        self.found: list[tuple[Counts, float]] = []
        self.floor = 0.0  # the worth a pattern must beat to be kept
        self.groups = len(sizes)
        # per resource, the best value per unit among groups from position i on
        resources = len(sizes[0]) if sizes else 0
        self.ratio = [[0.0] * resources for _ in range(len(order) + 1)]
        for i in range(len(order) - 1, -1, -1):
            for r in range(resources):
                size = self.sizes[i][r]
                unit = self.values[i] / size if size else float("inf")
                self.ratio[i][r] = max(self.ratio[i + 1][r], unit)

    def offer(self, counts: Sequence[int], worth: float) -> None:
        """Keep ``counts`` if it is among the best patterns seen (ties: first seen)."""
        if worth <= self.floor + _EPS:
            return
        pattern = tuple(counts)
        if any(pattern == f for f, _ in self.found):
            return
        self.found.append((pattern, worth))
        self.found.sort(key=lambda f: -f[1])
        del self.found[self.keep :]
        if len(self.found) == self.keep:
            self.floor = self.found[-1][1]

    def run(self, i: int, left: list[int], counts: list[int], worth: float) -> None:
        self.nodes -= 1
        if worth > self.floor + _EPS:
            self.offer(counts, worth)
        if i == len(self.order) or self.nodes <= 0:
            return
        bound = math.inf
        for ratio, room in zip(self.ratio[i], left, strict=True):
            bound = min(bound, ratio * room)
        if worth + bound <= self.floor + _EPS:
            return
        g = self.order[i]
        size = self.sizes[i]
        value = self.values[i]
        n = self.limits[i]
        for s, room in zip(size, left, strict=True):
            if s > 0 and room // s < n:
                n = room // s
        while n >= 0:
            counts[g] = n
            rest = [room - n * s for room, s in zip(left, size, strict=True)]
            self.run(i + 1, rest, counts, worth + n * value)
            if self.nodes <= 0:
                break
            n -= 1
        counts[g] = 0
