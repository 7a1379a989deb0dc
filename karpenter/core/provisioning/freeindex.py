"""A block index over existing nodes' free CPU, memory and pod slots, for first-fit scans.

The solver places a pod on the first existing node (in pass order) that takes it. In a busy
cluster most nodes are full, and checking each in turn makes a pass O(pods × nodes). Nodes are
grouped in blocks of 32 with the per-block maximum of each tracked resource; a block whose
maximum is below a pod's request cannot hold it and is skipped whole. The index only prunes:
every node it yields still goes through the full check, and order is preserved, so placements
are exactly those of the plain scan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from karpenter.core.model import resources as res

BLOCK = 32
_TRACKED = (res.CPU, res.MEMORY, res.PODS)


class FreeIndex:
    """Per-block maxima of remaining cpu/memory/pods over a list of free-capacity maps."""

    __slots__ = ("_free", "_maxima")

    def __init__(self, free: Sequence[dict[str, int]]) -> None:
        self._free = free
        self._maxima: list[tuple[int, int, int]] = [
            self._block_max(b) for b in range(0, len(free), BLOCK)
        ]

    def _block_max(self, start: int) -> tuple[int, int, int]:
        cpu = mem = pods = -(2**62)
        for remaining in self._free[start : start + BLOCK]:
            cpu = max(cpu, remaining.get(res.CPU, 0))
            mem = max(mem, remaining.get(res.MEMORY, 0))
            pods = max(pods, remaining.get(res.PODS, 0))
        return (cpu, mem, pods)

    def update(self, index: int) -> None:
        """Recompute the block of node ``index`` after its remaining capacity changed."""
        block = index // BLOCK
        self._maxima[block] = self._block_max(block * BLOCK)

    def candidates(self, start: int, request: res.Resources) -> Iterator[int]:
        """Indexes from ``start`` on whose block could hold ``request`` (in order)."""
        cpu = request.get(res.CPU, 0)
        mem = request.get(res.MEMORY, 0)
        pods = request.get(res.PODS, 0)
        total = len(self._free)
        block = start // BLOCK
        index = start
        maxima = self._maxima
        while index < total:
            m = maxima[block]
            if (
                (cpu <= 0 or m[0] >= cpu)
                and (mem <= 0 or m[1] >= mem)
                and (pods <= 0 or m[2] >= pods)
            ):
                end = min((block + 1) * BLOCK, total)
                free = self._free
                while index < end:
                    r = free[index]
                    if (
                        (cpu <= 0 or r.get(res.CPU, 0) >= cpu)
                        and (mem <= 0 or r.get(res.MEMORY, 0) >= mem)
                        and (pods <= 0 or r.get(res.PODS, 0) >= pods)
                    ):
                        yield index
                    index += 1
            block += 1
            index = block * BLOCK
