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

What a scan passes over is remembered per request: the nodes from its start up to the first
node with room (to the end, when none has) have none. Until some node's room grows, a scan for
the same request starting among them begins after them (within a what-if nodes only lose
room): in a packed cluster whose only room is on nodes that joined last (at the end of the
pass order), a scan ends or reaches them at once. A node that joins among them keeps them
when it has no room for the request (those after it move up one place). What-ifs scan copies
(``without``) that leave some nodes out and place pods on others; a copy's scan tells the
original too (while the original is as it was when copied), once the nodes the copy left out
or placed pods on are checked there, so the next what-if's scans start further on.
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
        "_touched",
        "_version",
    )

    def __init__(self, free: Sequence[dict[str, int]]) -> None:
        self._free = list(free)
        self._room = [_triple(r) for r in self._free]
        self._small = [_max(self._room[b : b + SMALL]) for b in range(0, len(free), SMALL)]
        self._front = [_front(self._room[b : b + SMALL]) for b in range(0, len(free), SMALL)]
        self._large = [_max(self._room[b : b + LARGE]) for b in range(0, len(free), LARGE)]
        # (cpu, memory, pods) request -> (s, e): no node from s up to (not including) e has
        # room for it
        self._empty: dict[Room, tuple[int, int]] = {}
        self._version = 0  # counts changes of room
        # A copy: the index it was made from, that index's version then, the nodes left out
        # and those whose room the copy changed.
        self._origin: tuple[FreeIndex, int] | None = None
        self._excluded: tuple[int, ...] = ()
        self._touched: set[int] = set()

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
            was = copy._room[index]
            copy._room[index] = (_NONE, _NONE, _NONE)
            copy._shrunk(index, was)
        copy._version = 0
        copy._origin = (self, self._version)
        copy._touched = set()
        return copy

    def replace(self, index: int, free: dict[str, int]) -> None:
        """Track ``free`` as node ``index``'s remaining capacity (a pass copied the node)."""
        self._free[index] = free
        self.update(index)

    def kill(self, index: int) -> None:
        """Node ``index`` left the snapshot: it has no room from now on (its slot stays)."""
        self._version += 1
        self._origin = None  # (copies do not lose nodes so: they tell their origin no more)
        self._room[index] = (_NONE, _NONE, _NONE)
        self._refresh(index)

    def insert(self, index: int, free: dict[str, int]) -> None:
        """A node joined the snapshot at ``index``; later nodes move up one place."""
        self._version += 1
        self._origin = None
        new = _triple(free)
        kept: dict[Room, tuple[int, int]] = {}
        for key, (s, e) in self._empty.items():
            if index < s:
                kept[key] = (s + 1, e + 1)  # the same nodes, one place further
            elif index >= e:
                kept[key] = (s, e)
            elif not _holds(new, key):
                kept[key] = (s, e + 1)  # the new node is among them but has no room either
            elif index > s:
                kept[key] = (s, index)  # those before the new node
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
        if self._origin is not None:
            self._touched.add(index)
        new = self._room[index] = _triple(self._free[index])
        if new[0] > old[0] or new[1] > old[1] or new[2] > old[2]:
            self._empty.clear()
            self._refresh(index)
        else:
            self._shrunk(index, old)  # placing pods only takes room: the common case

    def _shrunk(self, index: int, old: Room) -> None:
        """``_refresh`` after node ``index``'s room shrank from ``old`` (no component grew),
        recomputing only what ``old`` could have set: a block's maximum where it equalled
        ``old``, its front where ``old`` was on it (a room some other room holds leaves the
        front as it is, and so does any smaller room in its place), the large block's maximum
        where the small block's changed."""
        new = self._room[index]
        if new == old:
            return
        small = index // SMALL
        rows = self._room[small * SMALL : small * SMALL + SMALL]
        if old in self._front[small]:
            self._front[small] = _front(rows)
        m = self._small[small]
        if (
            (old[0] == m[0] and new[0] < old[0])
            or (old[1] == m[1] and new[1] < old[1])
            or (old[2] == m[2] and new[2] < old[2])
        ):
            self._small[small] = _max(rows)
            if self._small[small] != m:
                per = LARGE // SMALL
                large = index // LARGE
                self._large[large] = _max(self._small[large * per : large * per + per])

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
        known = self._empty.get(key)
        begin = known[1] if known is not None and known[0] <= start < known[1] else start
        yield from self._scan(start, begin, key)

    def _scan(self, start: int, begin: int, key: Room) -> Iterator[int]:
        """Nodes from ``begin`` on with room for ``key`` (none from ``start`` to ``begin``)."""
        total = len(self._room)
        index = self._next(begin, key)
        self._learn(start, index, key)
        while index < total:
            yield index
            index = self._next(index + 1, key)

    def _next(self, index: int, key: Room) -> int:
        """The first node from ``index`` on with room for ``key`` (the node count: none)."""
        cpu, mem, pods = key
        room, small, large, front = self._room, self._small, self._large, self._front
        total = len(room)
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
                return index
            index += 1
        return total

    def _learn(self, start: int, end: int, key: Room) -> None:
        """No node from ``start`` up to ``end`` has room for ``key``: remember it (joined to
        what is known when they meet, else the longer) and tell the origin."""
        if end <= start:
            return
        known = self._empty.get(key)
        if known is not None:
            s, e = known
            if start <= e and s <= end:
                start, end = min(s, start), max(e, end)
            elif e - s >= end - start:
                return
        self._empty[key] = (start, end)
        self._tell_origin(start, end, key)

    def _tell_origin(self, start: int, end: int, key: Room) -> None:
        """No node of this copy from ``start`` up to ``end`` has room for ``key``: nor has one
        of the index it was made from, if that did not change since and none of the nodes the
        copy left out or changed among them has room there."""
        if self._origin is None:
            return
        origin, version = self._origin
        if origin._version != version:
            return
        room = origin._room
        for i in (*self._excluded, *self._touched):
            if start <= i < end and _holds(room[i], key):
                return
        origin._learn(start, end, key)
