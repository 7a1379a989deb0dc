"""The candidates in the orders the disruption methods walk them, kept sorted between passes.

A pass ranks every candidate for consolidation (price per disruption cost, highest first, ties
by name), orders empty ones the same way, drifted ones by age and expiring ones by expiry. A
plan's world (``world``) changes a few candidates per command, so the index keeps each order
sorted and updates it node by node instead of sorting 10,000 candidates every pass. Each order
holds exactly what the plain method would build; the methods still apply their own checks
(budgets, pod blockers), so only the notes of passed-over nodes are not kept.

Single-node consolidation walks the ranked candidates until one consolidates; most of them
it judged "no" in an earlier pass, and the verdict memo still holds those answers. The index
hears from the memo which candidates have a kept answer (``learned``/``forgot``) and walks
only the others, in the walk's own order: the answer for a skipped one is "no" either way.
Answers that depend on the pass's split limit (``verdicts``) are walked while the pass has a
split left, so they are asked (and pay for their split) as in a fresh pass.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Iterator

from karpenter.core.disruption.candidates import Candidate, reschedulable
from karpenter.core.lifecycle import expires_at
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.nodepool import WHEN_EMPTY

Rank = tuple[float, str]


def rank(c: Candidate) -> Rank:
    """Consolidation order: price per disruption cost, highest first (ties by name)."""
    return (-c.savings_ratio, c.name)


def consolidatable(c: Candidate) -> bool:
    """Whether consolidation may act on ``c`` (``methods.consolidation_candidates``' rules)."""
    pool = c.nodepool
    return not (
        c.empty
        or pool.disruption.consolidate_after is None
        or pool.replicas is not None
        or pool.disruption.consolidation_policy == WHEN_EMPTY
        or c.instance_type is None
        or not c.zone
        or not c.capacity_type
        or not c.consolidatable
        or c.pod_blocker
    )


def waste(c: Candidate) -> float:
    """The hourly price of the room ``c`` leaves unused on its fullest resource (cpu or
    memory): a full node wastes nothing, an empty one its whole price."""
    allocatable = c.state.allocatable
    used = res.add(*(p.requests for p in c.state.pods if p.is_active()))
    share = 0.0
    for key in (res.CPU, res.MEMORY):
        total = allocatable.get(key, 0)
        if total > 0:
            share = max(share, used.get(key, 0) / total)
    return c.price * max(0.0, 1.0 - share)


def repackable(c: Candidate) -> bool:
    """Whether repack and batch delete may take a ranked candidate: not spot, with pods to
    move."""
    return c.capacity_type != lbl.CAPACITY_TYPE_SPOT and any(reschedulable(p) for p in c.pods)


def wasteful_key(c: Candidate) -> Rank:
    """Batch delete's order: most waste first (ties by name)."""
    return (-waste(c), c.name)


def _remove(rows: list[tuple[Rank, Candidate]], key: Rank) -> None:
    i = bisect.bisect_left(rows, (key,))
    if i < len(rows) and rows[i][0] == key:
        del rows[i]


def _drop(rows: list[Rank], key: Rank) -> None:
    i = bisect.bisect_left(rows, key)
    if i < len(rows) and rows[i] == key:
        del rows[i]


class CandidateIndex:
    """Candidates (and managed nodes, for expiration) in each method's order."""

    def __init__(self, candidates: Iterable[Candidate], managed: Iterable[Candidate]) -> None:
        self._ranked: list[tuple[Rank, Candidate]] = []
        self._pools: dict[str, list[Rank]] = {}
        self._eligible: dict[str, Candidate] = {}
        self._open: dict[str, list[Rank]] = {}  # per pool: eligible, without a kept answer
        self._split: dict[str, list[Rank]] = {}  # per pool: kept answers that await splits
        self._known: dict[str, bool] = {}  # kept single-node answers (awaiting splits?)
        self._splits_left: Callable[[], bool] = lambda: False
        self._empty: list[tuple[Rank, Candidate]] = []
        # Consolidatable and repackable candidates, most waste first (batch delete's walk),
        # with each one's key as it was filed.
        self._wasteful: list[tuple[Rank, Candidate]] = []
        self._waste_keys: dict[str, Rank] = {}
        self._drifted: dict[str, Candidate] = {}
        self._expiring: list[tuple[float, str, Candidate]] = []
        for c in candidates:
            self.add(c)
        for c in managed:
            self.add_managed(c)

    def add(self, c: Candidate) -> None:
        """Index a candidate."""
        row = (rank(c), c)
        if c.empty:
            bisect.insort(self._empty, row)
        if c.drift:
            self._drifted[c.name] = c
        if consolidatable(c):
            bisect.insort(self._ranked, row)
            bisect.insort(self._pools.setdefault(c.nodepool.name, []), row[0])
            self._eligible[c.name] = c
            self._file(c)
            if repackable(c):
                key = self._waste_keys[c.name] = wasteful_key(c)
                bisect.insort(self._wasteful, (key, c))

    def remove(self, c: Candidate) -> None:
        """Forget a candidate (as it was indexed)."""
        key = rank(c)
        if c.empty:
            _remove(self._empty, key)
        self._drifted.pop(c.name, None)
        if consolidatable(c):
            _remove(self._ranked, key)
            _drop(self._pools[c.nodepool.name], key)
            _drop(self._open.get(c.nodepool.name, []), key)
            _drop(self._split.get(c.nodepool.name, []), key)
            del self._eligible[c.name]
            wasted = self._waste_keys.pop(c.name, None)
            if wasted is not None:
                _remove(self._wasteful, wasted)

    def _file(self, c: Candidate) -> None:
        """Put an eligible candidate in the walk list its kept answer calls for."""
        pool, key = c.nodepool.name, rank(c)
        _drop(self._open.get(pool, []), key)
        _drop(self._split.get(pool, []), key)
        awaits = self._known.get(c.name)
        if awaits is None:
            bisect.insort(self._open.setdefault(pool, []), key)
        elif awaits:
            bisect.insort(self._split.setdefault(pool, []), key)

    # ---- what the verdict memo reports ----------------------------------------------------
    def learned(self, name: str, awaits_splits: bool) -> None:
        """A single-node answer for ``name`` is kept: walks skip it (once the pass has no
        split left, when the answer depends on that)."""
        if self._known.get(name) is awaits_splits:
            return  # filed so already
        self._known[name] = awaits_splits
        c = self._eligible.get(name)
        if c is not None:
            self._file(c)

    def forgot(self, name: str) -> None:
        """The kept answer for ``name`` is gone (or must be checked again)."""
        if self._known.pop(name, None) is None:
            return  # an eligible candidate without a kept answer is filed as open already
        c = self._eligible.get(name)
        if c is not None:
            self._file(c)

    def known(self, name: str) -> bool:
        """Whether a single-node "no" for ``name`` is kept and holds on this snapshot (what
        it rests on unchanged, no recheck pending): then the first-fit what-if for ``name``
        alone needs new capacity or leaves a pod unplaced (every kept "no" comes from one, or
        from the prefilter's proof that some pods need new capacity), so it cannot be deleted
        alone."""
        return name in self._known

    def forgot_all(self) -> None:
        """Every kept answer is gone."""
        self._known.clear()
        self._open = {pool: list(rows) for pool, rows in self._pools.items()}
        self._split = {}

    def add_managed(self, c: Candidate) -> None:
        """Index a managed node for expiration (blocked or not)."""
        at = expires_at(c.creation, c.expire_after)
        if at is not None:
            bisect.insort(self._expiring, (at, c.name, c))

    def remove_managed(self, c: Candidate) -> None:
        """Forget a managed node (as it was indexed)."""
        at = expires_at(c.creation, c.expire_after)
        if at is not None:
            i = bisect.bisect_left(self._expiring, (at, c.name))
            if i < len(self._expiring) and self._expiring[i][1] == c.name:
                del self._expiring[i]

    def expired(self, now: float) -> list[Candidate]:
        """Managed nodes expired at ``now``, earliest first (ties by name)."""
        end = bisect.bisect_right(self._expiring, (now, "\U0010ffff"))
        return [c for _, _, c in self._expiring[:end]]

    def empty(self) -> Iterator[Candidate]:
        """Empty candidates, ranked."""
        return (c for _, c in self._empty)

    def wasteful(self) -> Iterator[Candidate]:
        """The ranked candidates repack may take (``repackable``), most waste first."""
        return (c for _, c in self._wasteful)

    def drifted(self) -> list[Candidate]:
        """Drifted candidates (any order: the method sorts them)."""
        return list(self._drifted.values())

    def ranked(self) -> Iterator[Candidate]:
        """Candidates consolidation may act on, ranked."""
        return (c for _, c in self._ranked)

    def round_robin(
        self, allowed: Callable[[str], bool], splits_left: Callable[[], bool]
    ) -> Iterator[Candidate]:
        """The ranked candidates of the pools ``allowed`` says may be disrupted, taken in turn
        from each pool (pools in order of their best candidate, as single-node consolidation
        walks them), less those with a kept answer (those awaiting splits only while
        ``splits_left()``). The walk may be told of answers as it goes.
        """
        self._splits_left = splits_left
        pools = sorted(
            (pool for pool, rows in self._pools.items() if rows and allowed(pool)),
            key=lambda pool: self._pools[pool][0],
        )
        heap: list[tuple[int, int, Rank, str]] = []
        for turn, pool in enumerate(pools):
            self._push(heap, turn, pool, None)
        while heap:
            _, turn, key, pool = heapq.heappop(heap)
            yield self._eligible[key[1]]
            self._push(heap, turn, pool, key)

    def _push(
        self, heap: list[tuple[int, int, Rank, str]], turn: int, pool: str, after: Rank | None
    ) -> None:
        """Queue ``pool``'s next candidate to ask after ``after``, at its depth in the pool."""
        lists = [self._open.get(pool, [])]
        if self._splits_left():
            lists.append(self._split.get(pool, []))
        nexts = []
        for rows in lists:
            i = 0 if after is None else bisect.bisect_right(rows, after)
            if i < len(rows):
                nexts.append(rows[i])
        if nexts:
            key = min(nexts)
            depth = bisect.bisect_left(self._pools[pool], key)
            heapq.heappush(heap, (depth, turn, key, pool))
