"""Which bin types a packing considers: the ones no other type makes redundant.

Two lists per kind of bin. *Fitting* types may hold a pattern: cheapest first, none that a
cheaper-or-equal type beats on every resource, none dearer than the cheapest type that holds
the whole demand (it can stand in for any of them). *Pricing* types are the ones the LP needs:
a type is redundant there when k of its patterns fit another type at no more than k times its
price (on AWS a family's sizes are mostly such multiples, so this keeps the largest sizes and
the families with a different balance); pinned kinds keep every fitting type, because their
number of bins is fixed. Small types still matter for whole bins: patterns are retyped to the
cheapest fitting type that holds them.

The structures here are plain tuples of a ``packing``-like problem, passed in as sequences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

WINDOW = 32  # dominance is checked against this many kept types nearest in price
PRICING_TYPES = 100  # at most this many pricing types (those holding the mix cheapest per unit)
_EPS = 1e-9


def fitting(
    prices: Sequence[float],
    capacities: Sequence[Sequence[int]],
    allowed: Sequence[int],
    everything: Sequence[int],
) -> tuple[int, ...]:
    """``allowed`` types cheapest first, without dominated ones, up to the first that holds
    ``everything``."""
    kept: list[int] = []
    for t in sorted(allowed, key=lambda t: (prices[t], t)):
        capacity = capacities[t]
        if not _dominated(capacity, [capacities[k] for k in kept[-WINDOW:]]):
            kept.append(t)
        if _holds(capacity, everything):
            break
    return tuple(kept)


def _dominated(capacity: Sequence[int], others: Sequence[Sequence[int]]) -> bool:
    for other in others:
        for a, b in zip(other, capacity, strict=True):
            if a < b:
                break
        else:
            return True
    return False


def _holds(capacity: Sequence[int], need: Sequence[int]) -> bool:
    for c, n in zip(capacity, need, strict=True):
        if c < n:
            return False
    return True


def pricing(
    prices: Sequence[float],
    rooms: dict[int, tuple[int, ...]],
    types: Sequence[int],
    sizes: Sequence[Sequence[int]],
    mix: Sequence[int],
    scaled: bool,
) -> tuple[int, ...]:
    """At most ``PRICING_TYPES`` of ``types`` (those holding ``mix`` cheapest per unit), then,
    when ``scaled``, without those another one beats at scale (order kept)."""
    chosen = list(types)
    if len(chosen) > PRICING_TYPES:

        def per_unit(t: int) -> tuple[float, int]:
            held = min((c / m for c, m in zip(rooms[t], mix, strict=True) if m > 0), default=0)
            return (prices[t] / held if held > 0 else math.inf, t)

        best = set(sorted(chosen, key=per_unit)[:PRICING_TYPES])
        chosen = [t for t in chosen if t in best]
    if not scaled:
        return tuple(chosen)
    usable = {t: _usable(rooms[t], sizes) for t in chosen}
    return tuple(t for t in chosen if not _beaten_at_scale(t, chosen, prices, usable))


def _beaten_at_scale(
    t: int, types: Sequence[int], prices: Sequence[float], usable: dict[int, tuple[float, ...]]
) -> bool:
    """Whether k patterns of ``t`` fit another type for at most k times ``t``'s price (of two
    types equal in every way, the first is kept)."""
    price = prices[t]
    room = usable[t]
    for u in types:
        if u == t:
            continue
        k = max(1, math.ceil(prices[u] / price - 1e-6)) if price > 0 else 1
        if prices[u] > k * price + _EPS:
            continue
        if any(a < k * b for a, b in zip(usable[u], room, strict=True)):
            continue
        if k > 1 or prices[u] < price - _EPS or usable[u] != room or u < t:
            return True
    return False


def _usable(room: Sequence[int], sizes: Sequence[Sequence[int]]) -> tuple[float, ...]:
    """Per resource, the most of ``room`` any set of items of ``sizes`` can use: no more than
    the room, nor than another resource's room times the items' largest ratio of the two."""
    out = []
    for r, space in enumerate(room):
        most = float(space)
        for q, other in enumerate(room):
            if q == r or any(not s[q] for s in sizes):
                continue
            most = min(most, max(other, 0) * max(s[r] / s[q] for s in sizes))
        out.append(most)
    return tuple(out)
