"""A block index over existing nodes' free CPU, memory and pod slots, for first-fit scans.

The solver places a pod on the first existing node (in pass order) that takes it. In a busy
cluster most nodes are full, and checking each in turn makes a pass O(pods × nodes). Nodes are
grouped in blocks (of two sizes, below) with the per-block maximum of each tracked resource;
a block whose maximum is below a pod's request cannot hold it and is skipped whole. The
maxima are taken per resource, so a small block where one node has the CPU and another the
memory passes them; each small block also keeps its *front* (the rooms no other room of the
block holds), and a pod that fits none of them fits no node of the block. The index
only prunes: every node it yields still goes through the full check, and order is preserved,
so placements are exactly those of the plain scan.

A scan that yields no node at all is remembered (request, start): until some node's room grows,
a scan for the same request from that start or later would find none either (within a what-if
nodes only lose room), so it ends at once. A node that joins keeps what it has no room for
(later starts move up one place). Half the scans of a consolidation plan find no node, and
most repeat an earlier one (``bench/RESULTS.md``). What-ifs scan copies (``without``) that
leave some nodes out; while a copy is as it was made, a scan of it that finds no node tells
the original too, once the nodes left out are checked: the next what-if's scan ends at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from karpenter.core.model import resources as res

SMALL = 8  # nodes per small block
LARGE = 64  # nodes per large block (a multiple of SMALL)
_NONE = -(2**62)  # excluded nodes read as full on every tracked resource

Room = tuple[int, int, int]


def _triple(remaining: dict[str, int]) -> Room:
    return (remaining.get(res.CPU, 0), remaining.get(res.MEMORY, 0), remaining.get(res.PODS, 0))


def _holds(room: Room, key: Room) -> bool:
    return room[0] >= key[0] and room[1] >= key[1] and room[2] >= key[2]


def _max(rows: Sequence[Room]) -> Room:
    return (max(r[0] for r in rows), max(r[1] for r in rows), max(r[2] for r in rows))


def _front(rows: Sequence[Room]) -> tuple[Room, ...]:
    """The rooms no other room of ``rows`` holds (a request fits some row iff it fits one of
    these); excluded nodes never count."""
    kept: list[Room] = []
    for r in sorted(rows, reverse=True):
        if r[0] == _NONE:
            break
        if not any(k[1] >= r[1] and k[2] >= r[2] for k in kept):
            kept.append(r)
    return tuple(kept)


class FreeIndex:
    """Per-node, per-8 and per-64 (cpu, memory, pods) room over a list of free-capacity maps.

    The index keeps its own copy of the three tracked numbers per node (plain tuples are
    much cheaper to scan than dicts); ``update`` re-reads a node after the pass changed it.
    Two block sizes keep both kinds of cluster fast: a full cluster skips 64 nodes per test,
    a fragmented one (room for small pods everywhere, for large pods almost nowhere) narrows
    to 8 before testing nodes one by one.
    """

    __slots__ = (
        "_empty",
        "_excluded",
        "_free",
        "_front",
        "_large",
        "_origin",
        "_room",
        "_small",
        "_version",
    )

    def __init__(self, free: Sequence[dict[str, int]]) -> None:
        self._free = list(free)
        self._room = [_triple(r) for r in self._free]
        self._small = [_max(self._room[b : b + SMALL]) for b in range(0, len(free), SMALL)]
        self._front = [_front(self._room[b : b + SMALL]) for b in range(0, len(free), SMALL)]
        self._large = [_max(self._room[b : b + LARGE]) for b in range(0, len(free), LARGE)]
        # (cpu, memory, pods) request -> the lowest start from which a scan found no node
        self._empty: dict[Room, int] = {}
        self._version = 0  # counts changes of room (a copy tells its origin only before any)
        # A copy: the index it was made from, that index's version then, the nodes left out.
        self._origin: tuple[FreeIndex, int] | None = None
        self._excluded: tuple[int, ...] = ()

    def without(self, excluded: Iterable[int]) -> FreeIndex:
        """A copy in which the ``excluded`` nodes have no room at all (the pass skips them)."""
        copy = FreeIndex.__new__(FreeIndex)
        copy._free = list(self._free)
        copy._room = list(self._room)
        copy._small = list(self._small)
        copy._front = list(self._front)
        copy._large = list(self._large)
        copy._empty = dict(self._empty)  # excluding nodes only takes room away
        copy._excluded = tuple(excluded)
        for index in copy._excluded:
            copy._room[index] = (_NONE, _NONE, _NONE)
            copy._refresh(index)
        copy._version = 0
        copy._origin = (self, self._version)
        return copy

    def replace(self, index: int, free: dict[str, int]) -> None:
        """Track ``free`` as node ``index``'s remaining capacity (a pass copied the node)."""
        self._free[index] = free
        self.update(index)

    def kill(self, index: int) -> None:
        """Node ``index`` left the snapshot: it has no room from now on (its slot stays)."""
        self._version += 1
        self._room[index] = (_NONE, _NONE, _NONE)
        self._refresh(index)

    def insert(self, index: int, free: dict[str, int]) -> None:
        """A node joined the snapshot at ``index``; later nodes move up one place."""
        self._version += 1
        new = _triple(free)
        kept: dict[Room, int] = {}
        for key, start in self._empty.items():
            if start > index:
                kept[key] = start + 1  # the same nodes, one place further
            elif not _holds(new, key):
                kept[key] = start  # the new node is in range but has no room for it
        self._empty = kept
        self._free.insert(index, free)
        self._room.insert(index, new)
        # Blocks from the insertion point on hold other nodes now; nodes join near the end
        # of the pass order in practice (replacements), so few blocks are recomputed.
        first = index // SMALL
        room = self._room
        self._small[first:] = [
            _max(room[b : b + SMALL]) for b in range(first * SMALL, len(room), SMALL)
        ]
        self._front[first:] = [
            _front(room[b : b + SMALL]) for b in range(first * SMALL, len(room), SMALL)
        ]
        per = LARGE // SMALL
        first_large = index // LARGE
        small = self._small
        self._large[first_large:] = [
            _max(small[b : b + per]) for b in range(first_large * per, len(small), per)
        ]

    def update(self, index: int) -> None:
        """Re-read node ``index`` after its remaining capacity changed."""
        old = self._room[index]
        if old[0] == _NONE:
            return
        self._version += 1
        new = self._room[index] = _triple(self._free[index])
        if self._empty and (new[0] > old[0] or new[1] > old[1] or new[2] > old[2]):
            self._empty.clear()
        self._refresh(index)

    def _refresh(self, index: int) -> None:
        small = index // SMALL
        rows = self._room[small * SMALL : small * SMALL + SMALL]
        self._small[small] = _max(rows)
        self._front[small] = _front(rows)
        per = LARGE // SMALL
        large = index // LARGE
        self._large[large] = _max(self._small[large * per : large * per + per])

    def candidates(self, start: int, request: res.Resources) -> Iterator[int]:
        """Indexes from ``start`` on that have room for ``request``'s cpu/memory/pods, in order."""
        # A zero request passes any node, even an overcommitted one, but never an excluded one.
        cpu = max(request.get(res.CPU, 0), 0) or _NONE + 1
        mem = max(request.get(res.MEMORY, 0), 0) or _NONE + 1
        pods = max(request.get(res.PODS, 0), 0) or _NONE + 1
        key = (cpu, mem, pods)
        seen = self._empty.get(key)
        if seen is None or seen > start:
            yield from self._scan(start, key)

    def _scan(self, start: int, key: Room) -> Iterator[int]:
        cpu, mem, pods = key
        room, small, large, front = self._room, self._small, self._large, self._front
        total = len(room)
        index = start
        found = False
        while index < total:
            if index % LARGE == 0:
                m = large[index // LARGE]
                if m[0] < cpu or m[1] < mem or m[2] < pods:
                    index += LARGE
                    continue
            if index % SMALL == 0:
                m = small[index // SMALL]
                if m[0] < cpu or m[1] < mem or m[2] < pods:
                    index += SMALL
                    continue
                # The maxima pass whenever one node has the cpu and another the memory;
                # the block's front says whether one node has both.
                for f in front[index // SMALL]:
                    if f[0] >= cpu and f[1] >= mem and f[2] >= pods:
                        break
                else:
                    index += SMALL
                    continue
            r = room[index]
            if r[0] >= cpu and r[1] >= mem and r[2] >= pods:
                found = True
                yield index
            index += 1
        if not found:
            self._empty[key] = start
            self._tell_origin(start, key)

    def _tell_origin(self, start: int, key: Room) -> None:
        """A scan of this copy from ``start`` found no node for ``key``: so does one of the
        index it was made from, if neither changed since and no node left out has room."""
        if self._origin is None or self._version:
            return
        origin, version = self._origin
        if origin._version != version:
            return
        room = origin._room
        if any(i >= start and _holds(room[i], key) for i in self._excluded):
            return
        seen = origin._empty.get(key)
        if seen is None or seen > start:
            origin._empty[key] = start
