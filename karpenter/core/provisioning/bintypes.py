"""Which bin types a packing considers: the ones no other type makes redundant.

Two lists per kind of bin. *Fitting* types may hold a pattern: cheapest first, none that a
cheaper-or-equal type beats on every resource, none dearer than the cheapest type that holds
the whole demand (it can stand in for any of them). *Pricing* types are the ones the LP needs:
a type is redundant there when k of its patterns fit another type at no more than k times its
price (on AWS a family's sizes are mostly such multiples, so this keeps the largest sizes and
the families with a different balance); pinned kinds keep every fitting type, because their
number of bins is fixed. Small types still matter for whole bins: patterns are retyped to the
cheapest fitting type that holds them.

The structures here are plain tuples of a ``packing``-like problem, passed in as sequences;
the dominance checks run over all types at once as integer and float arrays (numpy, loaded
with the packing), in the same arithmetic as one type at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
FloatMatrix = npt.NDArray[np.float64]

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
    order = sorted(allowed, key=lambda t: (prices[t], t))
    if not order:
        return ()
    matrix = np.array([capacities[t] for t in order], dtype=np.int64)
    kept: list[int] = []  # positions in ``order``
    for n, t in enumerate(order):
        window = matrix[kept[-WINDOW:]]
        if not bool(np.all(window >= matrix[n], axis=1).any()):
            kept.append(n)
        if _holds(capacities[t], everything):
            break
    return tuple(order[n] for n in kept)


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
    if not scaled or not chosen:
        return tuple(chosen)
    ids = np.array(chosen, dtype=np.int64)
    cost = np.array([prices[t] for t in chosen], dtype=np.float64)
    usable = np.array([_usable(rooms[t], sizes) for t in chosen], dtype=np.float64)
    usable = usable.reshape(len(chosen), -1)
    return tuple(t for n, t in enumerate(chosen) if not _beaten_at_scale(n, ids, cost, usable))


def _beaten_at_scale(n: int, ids: Ints, prices: Floats, usable: FloatMatrix) -> bool:
    """Whether k patterns of type ``n`` (a row) fit another type for at most k times its price
    (of two types equal in every way, the first is kept): for every other type u at once,
    k = max(1, ⌈price(u) ÷ price⌉), in the float arithmetic of one type at a time."""
    price = float(prices[n])
    room = usable[n]
    if price > 0:
        k = np.maximum(np.ceil(prices / price - 1e-6), 1.0)
    else:
        k = np.ones(len(prices))
    cheap = prices <= k * price + _EPS
    holds = np.all(usable >= k[:, None] * room[None, :], axis=1)
    differs = (k > 1) | (prices < price - _EPS) | np.any(usable != room[None, :], axis=1)
    beaten = cheap & holds & (differs | (ids < ids[n]))
    beaten[n] = False
    return bool(beaten.any())


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
