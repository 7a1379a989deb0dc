"""Pricing's greedy fills for many bin types at once: one array operation per item group.

A pricing round fills every pricing type of a kind greedily (``pricing.fill``): the same items
in the same order, only the room differs. Done type by type that is a Python loop over types ×
groups × resources, most of a pass's time on catalogues with hundreds of types; here each
group is one integer array operation over all the types. The answers are exactly
``pricing.fill``'s: integer floor division as Python's, and each type's worth summed in the
same order in the same float64 arithmetic. So is ``first_holder``'s scan for the first
(cheapest) type that holds a load. numpy is loaded with HiGHS, so this module is imported only
by a packing that runs (never by a first-fit pass).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.int64]


def matrix(rows: Sequence[Sequence[int]], width: int) -> Matrix:
    """``rows`` as a (len(rows), width) integer matrix."""
    return np.array(rows, dtype=np.int64).reshape(len(rows), width)


def fill(
    sizes: Sequence[Sequence[int]],
    limits: Sequence[int],
    values: Sequence[float],
    rooms: Matrix,
    order: Sequence[int],
) -> tuple[Matrix, list[float]]:
    """``pricing.fill`` for each row of ``rooms``: the counts per group (one row per room)
    and each pattern's worth."""
    left = rooms.copy()
    counts = np.zeros((rooms.shape[0], len(sizes)), dtype=np.int64)
    worth = np.zeros(rooms.shape[0], dtype=np.float64)
    for g in order:
        n = np.full(rooms.shape[0], limits[g], dtype=np.int64)
        size = sizes[g]
        for r, s in enumerate(size):
            if s > 0:
                np.minimum(n, left[:, r] // s, out=n)
        np.maximum(n, 0, out=n)
        if not n.any():
            continue
        counts[:, g] = n
        worth += n * values[g]
        for r, s in enumerate(size):
            if s:
                left[:, r] -= n * s
    return counts, worth.tolist()


def singles(sizes: Sequence[Sequence[int]], limits: Sequence[int], rooms: Matrix) -> Matrix:
    """``pricing.fit_count`` of each group alone in each row of ``rooms`` (one column per
    group)."""
    out = np.zeros((rooms.shape[0], len(sizes)), dtype=np.int64)
    for g, size in enumerate(sizes):
        n = np.full(rooms.shape[0], limits[g], dtype=np.int64)
        for r, s in enumerate(size):
            if s > 0:
                np.minimum(n, rooms[:, r] // s, out=n)
        np.maximum(n, 0, out=out[:, g])
    return out


def first_holder(capacities: Matrix, need: Sequence[int]) -> int:
    """The first row of ``capacities`` at least ``need`` in every column (-1: none)."""
    if not capacities.shape[0]:
        return -1
    holds: npt.NDArray[np.bool_] = np.all(capacities >= np.array(need, dtype=np.int64), axis=1)
    first = int(holds.argmax())
    return first if bool(holds[first]) else -1
