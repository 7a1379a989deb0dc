"""Integer programs over whole nodes that bound a price from below (HiGHS' proven bound).

Nodes of given types (priced in one zone) must cover a demand summed per resource; pods do not
split between nodes, so a node holds at most as many pods of a size as fit it alone, and at
most as many pods in all as fit it of the sizes' smallest stand-in. Only the bound matters,
so HiGHS' primal heuristics are off (``lean``). The programs are relaxations of any valid
fleet (packing within a node is ignored beyond those counts), so their bounds are bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from karpenter.core.provisioning import lp
from karpenter.core.provisioning.boundmodel import NodeType

ZONE_NODES = 1000  # branch-and-bound nodes per program (its proven bound is kept)

TOGETHER_NODES = 50  # the program over every zone at once: its bound moves little beyond

Size = tuple[float, ...]
Free = tuple[Size, frozenset[str], int]  # pods of one size free to go to any of some zones


def integer_cover(
    types: Sequence[NodeType],
    zone: str,
    need: Sequence[float],
    counts: dict[tuple[float, ...], int],
) -> float:
    """HiGHS' proven bound on whole nodes of ``types`` (priced in ``zone``) covering ``need``
    per resource and ``counts`` pods per size: a node holds at most as many pods of a size as
    fit it alone, and at most as many pods as fit it of the sizes' smallest stand-in. Only the
    bound matters, so HiGHS' primal heuristics are off (``lean``): most of its time, otherwise."""
    if not any(v > 0 for v in need):
        return 0.0
    sizes = sorted(counts)
    smallest = tuple(min((s[r] for s in sizes), default=0.0) for r in range(len(need)))
    rows = [*need, *(float(counts[s]) for s in sizes)]
    rows += [float(sum(counts.values()))] if sizes else []
    program = lp.Model(rows, [lp.INF] * len(rows))
    for t in pareto(types, zone):
        entries = list(enumerate(t.capacity))
        for k, size in enumerate([*sizes, smallest] if sizes else []):
            held = fit(t.capacity, size)
            if held is not None:
                entries.append((len(need) + k, float(held)))
        program.add_column(t.zones[zone], entries, integer=True)
    if not program.columns:
        return 0.0
    solution = lp.solve(program, integer=True, node_limit=ZONE_NODES, lean=True)
    return max(solution.bound, 0.0) if math.isfinite(solution.bound) else 0.0


def fit(capacity: Sequence[float], size: Sequence[float]) -> int | None:
    """How many pods of ``size`` fit ``capacity`` alone (None: no limit, the size is 0)."""
    fits = [math.floor(c / s + 1e-9) for c, s in zip(capacity, size, strict=True) if s > 0]
    return max(min(fits), 0) if fits else None


def pareto(types: Sequence[NodeType], zone: str) -> list[NodeType]:
    """Types no cheaper-or-equal type in ``zone`` beats on every resource."""
    kept: list[NodeType] = []
    for t in sorted(types, key=lambda t: (t.zones[zone], t.template, t.index)):
        if not any(all(a >= b for a, b in zip(k.capacity, t.capacity, strict=True)) for k in kept):
            kept.append(t)
    return kept


def zones_together(
    types: Sequence[NodeType], forced: dict[str, list[Size]], free: Sequence[Free]
) -> float:
    """HiGHS' proven bound on whole nodes in every zone, where each zone's nodes cover its
    ``forced`` pods and the ``free`` pods it takes (each goes to one of its zones), per
    resource, per pod size (as many as fit a node alone) and in number (as many as fit of the
    smallest size of all)."""
    if any(not allowed for _, allowed, _ in free):
        return 0.0  # a pod no zone offers: nothing to say (the pass leaves it unschedulable)
    zones = sorted({*forced, *(z for _, allowed, _ in free for z in allowed)})
    sizes = sorted({*(s for demand in forced.values() for s in demand), *(s for s, _, _ in free)})
    if not sizes:
        return 0.0
    width = len(sizes[0])
    smallest = tuple(min(s[r] for s in sizes) for r in range(width))
    per_zone = width + len(sizes) + 1  # resources, pods per size, pods in all
    lower: list[float] = []
    for zone in zones:
        demand = forced.get(zone, [])
        lower += [sum(s[r] for s in demand) for r in range(width)]
        lower += [float(demand.count(s)) for s in sizes]
        lower.append(float(len(demand)))
    lower += [float(n) for _, _, n in free]
    upper = [lp.INF] * (per_zone * len(zones)) + [float(n) for _, _, n in free]
    program = lp.Model(lower, upper)
    for z, zone in enumerate(zones):
        row = z * per_zone
        for t in pareto([t for t in types if zone in t.zones], zone):
            entries = [(row + r, c) for r, c in enumerate(t.capacity)]
            for k, size in enumerate([*sizes, smallest]):
                held = fit(t.capacity, size)
                if held is not None:
                    entries.append((row + width + k, float(held)))
            program.add_column(t.zones[zone], entries, integer=True)
        for f, (size, allowed, _) in enumerate(free):
            if zone in allowed:
                entries = [(row + r, -s) for r, s in enumerate(size) if s]
                entries += [(row + width + sizes.index(size), -1.0), (row + per_zone - 1, -1.0)]
                entries.append((per_zone * len(zones) + f, 1.0))
                program.add_column(0.0, entries, integer=True)
    solution = lp.solve(program, integer=True, node_limit=TOGETHER_NODES, lean=True)
    return max(solution.bound, 0.0) if math.isfinite(solution.bound) else 0.0
