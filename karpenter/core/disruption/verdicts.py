"""Judging a set of candidates once: an exact memo of "cannot consolidate" across passes.

``judge`` answers what a pass asks of consolidation candidates: the prefilter's proof that they
cannot consolidate, else the what-if. A plan runs one command per pass and every pass walks the
ranked candidates from the top, so without a memo the same hopeless candidates are judged again
each pass (O(nodes) per pass, O(nodes²) per plan). The memo keeps each "no" for as long as the
fresh computation would give it again, and the world (``world``) reports every change:

- A prefilter "no" rests on a residual (the candidates' pods that must go on a replacement, per
  resource) for which no cheaper type exists; a larger residual keeps the answer "no"
  (``prefilter.verdict``). The residual is the larger of two bounds, and each grows only:
  the *excess* over the free room of every other node, while that total room does not grow
  past the value it had (a watermark per resource the verdict needs); the *homeless* pods, no
  other node having room for one of them alone. Once nodes join, those a joined node has room
  for count only beyond the joined nodes' room as it is now (the answer is checked again on
  that smaller residual when next asked, and only then: once checked, the answer holds while
  rooms only shrink, and a node that joins with room for none of the pods still counted whole,
  when the others fit in the joined room already, leaves that residual as it was). A check
  that finds no joined node with room for any homeless pod any more (they filled) faces the
  residual the answer was kept with, so the kept answer is its result.
- A what-if "no" is the replay of a first-fit pass: each pod goes to the first node in pass
  order that takes it, else to new NodeClaims. The replay is identical while the nodes that
  received pods, and the candidates, are unchanged, and no node joined ahead of where a pod of
  its size went (or went to a NodeClaim): nodes that only gained pods or left reject whatever
  they rejected (resources, host ports, taints and labels only narrow). Topology (spread,
  affinity), volumes, NodePool limits, reservations and Balanced pools make verdicts depend on
  more than that; what-ifs where they are in play are not kept.

Either kind is forgotten when one of its candidates changes. The notes a pass keeps may then
differ in wording from a fresh pass's, never in outcome, so a plan's last pass runs plain.

Split consolidation (``split``) tries at most a few splits per pass, so an answer can depend
on how many the pass has left when it is asked. Each entry says how: *0* it does not (no
split possible, or, for a prefilter answer, the fluid floor of its residual already at or
above the candidates' price, which a larger residual keeps); *1* the answer came after one
split attempt, which a fresh computation repeats (and pays for) whenever the pass has a split
left, and which failed; *-1* it holds only once the pass has no split left. Walks skip only
answers of the first kind; the others are asked, in order, and pay for their split.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from karpenter.core.disruption import split
from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.commands import Command, NoOp
from karpenter.core.disruption.consolidation import STRANDS, consolidate
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.disruption.prefilter import Assessment, assess, refuses
from karpenter.core.disruption.simulation import OUTCOMES, Outcome
from karpenter.core.model import resources as res
from karpenter.core.provisioning.existing import StateNode
from karpenter.core.provisioning.podwork import unconstrained

if TYPE_CHECKING:
    from karpenter.core.disruption.ranking import CandidateIndex

PREFILTER = "Prefilter"
Shape = tuple[tuple[str, int], ...]
# Pass-order position: (0 initialized / 1 not, name); FAR is beyond every node (a NodeClaim).
Order = tuple[int, str]
FAR: Order = (2, "")
_TRACKED = (res.CPU, res.MEMORY, res.PODS)  # what the free-capacity index screens on


def order(state: StateNode) -> Order:
    """Where a node comes in the solver's pass order (initialized first, then by name)."""
    return (0 if state.initialized else 1, state.name)


def room_for(shape: Mapping[str, int], remaining: Mapping[str, int]) -> bool:
    """The free-capacity index would offer a node this much room to a pod of ``shape``."""
    for k in _TRACKED:  # a loop, not all(...): it runs millions of times in a large plan
        need = shape.get(k, 0)
        if need > 0 and remaining.get(k, 0) < need:
            return False
    return True


@dataclass(slots=True)
class Work:
    """What judging cost, in the units a pass may be bounded by."""

    judged: int = 0  # answers given (memo hits included)
    remembered: int = 0  # answers the memo gave
    prefilters: int = 0  # prefilter computations
    whatifs: int = 0  # what-if simulations
    unmoved: int = 0  # joins that left a checked prefilter answer as it was (no new check)


@dataclass(slots=True)
class _Entry:
    verdict: NoOp
    states: tuple[StateNode, ...]
    nodes: tuple[str, ...]  # a change to any of these forgets the entry
    reach: dict[Shape, Order]  # per pod shape: how far in pass order such a pod went
    marks: dict[str, int]  # free-room totals the entry needs not to grow past
    seq: int
    splits: int = 0  # how the answer depends on the pass's splits left (module docstring)
    # Prefilter entries: the homeless pods and excess the answer rests on, and the nodes
    # that joined since with room for some homeless pod (it may go there now).
    homeless: list[res.Resources] = field(default_factory=list)
    excess: dict[str, int] = field(default_factory=dict)
    joined: list[str] = field(default_factory=list)
    # As last checked: the homeless pods no joined node had room for, whether the others fit
    # in the joined nodes' room together, and whether a join since calls for a new check.
    kept: list[res.Resources] = field(default_factory=list)
    housed_fit: bool = True
    pending: bool = False
    # ``splits`` for the residual the answer was kept with (every homeless pod whole).
    full_splits: int = 0


@dataclass(slots=True)
class VerdictMemo:
    """The "no" answers of earlier passes that a fresh pass would give again."""

    # Set per pass by the world: whether what-if answers may be kept on this snapshot.
    whatifs_ok: bool = False
    work: Work = field(default_factory=Work)
    # Told which single candidates have a kept answer, so walks can skip them.
    watcher: CandidateIndex | None = None
    _entries: dict[tuple[str, ...], _Entry] = field(default_factory=dict)
    _by_node: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    _by_shape: dict[Shape, tuple[dict[str, int], set[tuple[str, ...]]]] = field(
        default_factory=dict
    )
    _marks: dict[str, list[tuple[int, int, tuple[str, ...]]]] = field(default_factory=dict)
    _seq: int = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, ps: DisruptionPass, candidates: Sequence[Candidate]) -> NoOp | None:
        """The kept answer for exactly these candidates, if any."""
        key = tuple(c.name for c in candidates)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if not all(
            s is c.state or s.same_objects(c.state)
            for s, c in zip(entry.states, candidates, strict=True)
        ):
            self._drop(key)
            return None
        if entry.splits < 0 and ps.splits_left > 0:
            return None  # holds only once no split is left: ask again (the entry stays)
        if entry.pending and not self._still(ps, candidates, entry):
            self._drop(key)
            return None
        if entry.splits > 0 and ps.splits_left > 0:
            ps.splits_left -= 1  # the attempt a fresh computation would make (and fail)
        return entry.verdict

    def _still(self, ps: DisruptionPass, candidates: Sequence[Candidate], e: _Entry) -> bool:
        """Whether a prefilter "no" holds now that nodes joined (and keep only the joined
        nodes that still have room for a homeless pod).

        A homeless pod can go only to a node that joined since, and those take no more than
        their room now (a node's room never grows), so the pods a joined node has room for
        still need new capacity beyond the joined nodes' total room."""
        free = ps.cache["free"]
        names = [name for name in e.joined if name in free]
        rooms = [free[name] for name in names]
        housed: list[res.Resources] = []
        kept: list[res.Resources] = []
        for r in e.homeless:
            (housed if any(room_for(r, room) for room in rooms) else kept).append(r)
        if not housed:
            return self._as_kept(candidates, e)
        spill = res.floor_zero(res.subtract(res.add(*housed), res.add(*rooms)))
        bound = res.maximum((e.excess, res.add(*kept, spill)))
        if not refuses(ps, candidates, bound):
            return False
        e.kept, e.housed_fit, e.pending = kept, not any(spill.values()), False
        e.splits = _prefilter_splits(ps, candidates, bound)
        # Joined nodes with room for no homeless pod never will have (rooms only shrink).
        pairs = zip(names, rooms, strict=True)
        e.joined = [n for n, room in pairs if any(room_for(r, room) for r in housed)]
        key = tuple(c.name for c in candidates)
        if len(key) == 1 and self.watcher is not None:
            self.watcher.learned(key[0], e.splits != 0)
        return True

    def _as_kept(self, candidates: Sequence[Candidate], e: _Entry) -> bool:
        """``_still`` when no joined node has room for a homeless pod now: every one counts
        whole, so the residual is the one the answer was kept with, refused then and now (its
        answer depends on the pass's splits left only where ``full_splits`` says so, and such
        an entry is checked only once no split is left), with the split dependence it had."""
        e.kept, e.housed_fit, e.pending = list(e.homeless), True, False
        e.splits, e.joined = e.full_splits, []
        if len(candidates) == 1 and self.watcher is not None:
            self.watcher.learned(candidates[0].name, e.splits != 0)
        return True

    def keep_prefilter(
        self, ps: DisruptionPass, candidates: Sequence[Candidate], found: Assessment
    ) -> None:
        """Keep a prefilter "no", with the bounds it needs (see the module docstring)."""
        homeless, shapes = list(found.homeless), found.shapes
        excess = found.excess
        totals = ps.cache["free"]["__total__"]
        marks = {k: totals.get(k, 0) for k, v in excess.items() if v > 0}
        together = found.together
        if refuses(ps, candidates, together):
            marks, excess = {}, {}  # the homeless pods alone settle it
        elif refuses(ps, candidates, excess):
            homeless, shapes, together = [], [], {}  # the excess alone settles it
        reach = dict.fromkeys(shapes, FAR)
        bound = res.maximum((excess, together))
        splits = _prefilter_splits(ps, candidates, bound)
        self._keep(candidates, NoOp(PREFILTER, found.message), (), reach, marks, splits)
        entry = self._entries[tuple(c.name for c in candidates)]
        entry.homeless, entry.excess, entry.kept = homeless, excess, homeless
        entry.full_splits = splits

    def keep_whatif(
        self,
        ps: DisruptionPass,
        candidates: Sequence[Candidate],
        answer: NoOp,
        outcomes: Sequence[Outcome],
        splits: int,
    ) -> None:
        """Keep a what-if "no", with the nodes and pod sizes its replay depends on."""
        base = ps.reuse.snapshot(ps.cluster)
        used: set[str] = set()
        reach: dict[Shape, Order] = {}
        for outcome in outcomes:
            for requests, where in outcome.placed():
                at = FAR
                if where:
                    used.add(where)
                    i = base.index.get(where)
                    at = order(base.states[i]) if i is not None else FAR
                shape = _shape(requests)
                reach[shape] = max(reach.get(shape, at), at)
        self._keep(candidates, answer, tuple(sorted(used)), reach, {}, splits)

    def _keep(
        self,
        candidates: Sequence[Candidate],
        answer: NoOp,
        used: tuple[str, ...],
        reach: dict[Shape, Order],
        marks: dict[str, int],
        splits: int,
    ) -> None:
        key = tuple(c.name for c in candidates)
        self._drop(key)
        self._seq += 1
        nodes = tuple(dict.fromkeys((*key, *used)))
        states = tuple(c.state for c in candidates)
        self._entries[key] = _Entry(answer, states, nodes, reach, marks, self._seq, splits)
        for name in nodes:
            self._by_node.setdefault(name, set()).add(key)
        for shape in reach:
            self._by_shape.setdefault(shape, (dict(shape), set()))[1].add(key)
        for name, value in marks.items():
            heapq.heappush(self._marks.setdefault(name, []), (value, self._seq, key))
        if len(key) == 1 and self.watcher is not None:
            self.watcher.learned(key[0], splits != 0)

    def _drop(self, key: tuple[str, ...]) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        if len(key) == 1 and self.watcher is not None:
            self.watcher.forgot(key[0])
        for name in entry.nodes:
            keys = self._by_node.get(name)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_node[name]
        for shape in entry.reach:
            held = self._by_shape.get(shape)
            if held is not None:
                held[1].discard(key)
                if not held[1]:
                    del self._by_shape[shape]

    # ---- what the world reports ---------------------------------------------------------
    def nodes_changed(self, names: Sequence[str]) -> None:
        """These nodes left or changed: forget what was judged with or on them."""
        for name in names:
            for key in list(self._by_node.get(name, ())):
                self._drop(key)

    def node_joined(self, at: Order, remaining: Mapping[str, int]) -> None:
        """A node joined at ``at`` in pass order with this much room."""
        for shape, (requests, keys) in list(self._by_shape.items()):
            if room_for(requests, remaining):
                for key in list(keys):
                    entry = self._entries.get(key)
                    if entry is None or entry.reach[shape] <= at:
                        continue
                    if entry.verdict.kind != PREFILTER:
                        self._drop(key)
                    elif not entry.joined or entry.joined[-1] != at[1]:
                        entry.joined.append(at[1])
                        if not entry.pending and _unmoved(entry, remaining):
                            self.work.unmoved += 1
                            continue
                        entry.pending = True
                        if len(key) == 1 and self.watcher is not None:
                            self.watcher.forgot(key[0])  # to be checked again

    def totals_changed(self, totals: Mapping[str, int]) -> None:
        """The free room summed over every node is now ``totals``."""
        for name, heap in self._marks.items():
            value = totals.get(name, 0)
            while heap and heap[0][0] < value:
                _, seq, key = heapq.heappop(heap)
                entry = self._entries.get(key)
                if entry is not None and entry.seq == seq:
                    self._drop(key)
            if len(heap) > 4 * len(self._entries) + 64:
                live = [row for row in heap if self._live(row)]
                heapq.heapify(live)
                self._marks[name] = live

    def _live(self, row: tuple[int, int, tuple[str, ...]]) -> bool:
        entry = self._entries.get(row[2])
        return entry is not None and entry.seq == row[1]

    def clear(self) -> None:
        """Something every verdict depends on changed: forget them all."""
        self._entries.clear()
        self._by_node.clear()
        self._by_shape.clear()
        self._marks.clear()
        if self.watcher is not None:
            self.watcher.forgot_all()


def _unmoved(entry: _Entry, remaining: Mapping[str, int]) -> bool:
    """A node joining with ``remaining`` room leaves a checked prefilter answer's bound as it
    was: it has room for none of the pods the check found no room for, and the others fit in
    the joined nodes' room already (more room keeps them fitting)."""
    return entry.housed_fit and not any(room_for(r, remaining) for r in entry.kept)


def _shape(requests: Mapping[str, int]) -> Shape:
    return tuple(sorted(requests.items()))


def _prefilter_splits(
    ps: DisruptionPass, candidates: Sequence[Candidate], bound: Mapping[str, int]
) -> int:
    """0 when no larger residual than ``bound`` makes a split worth trying, else -1."""
    if not split.possible(ps, candidates):
        return 0
    price = sum(c.price for c in candidates)
    if split.fluid_floor(ps, bound) >= price or split.hopeless(ps, bound, price):
        return 0  # both bounds only grow with the residual
    return -1


def _hopeless(ps: DisruptionPass, candidates: Sequence[Candidate], base: Outcome) -> bool:
    """The what-if's pods on new capacity prove no split pays (the replay puts the same pods
    there, so the proof holds as long as the answer)."""
    held = split.replaced(candidates, base)
    return bool(held) and split.hopeless(ps, held, sum(c.price for c in candidates))


_UNKEPT = frozenset({"Balanced", STRANDS})


def judge(ps: DisruptionPass, candidates: Sequence[Candidate], method: str) -> Command | NoOp:
    """Consolidating exactly ``candidates``: the command, or why not (kind ``Prefilter``: the
    prefilter's proof, whose message is the whole note)."""
    memo = ps.verdicts
    if memo is not None:
        memo.work.judged += 1
        known = memo.get(ps, candidates)
        if known is not None:
            memo.work.remembered += 1
            return known
        memo.work.prefilters += 1
    found = assess(ps, candidates)
    if found.message:
        if memo is not None:
            memo.keep_prefilter(ps, candidates, found)
        return NoOp(PREFILTER, found.message)
    if memo is None:
        return consolidate(ps, candidates, method)
    memo.work.whatifs += 1
    keep = memo.whatifs_ok and all(unconstrained(p) for c in candidates for p in c.pods)
    if not keep:
        return consolidate(ps, candidates, method)
    derived = ps.reuse.snapshot(ps.cluster).derived
    outcomes: list[Outcome] = []
    derived[OUTCOMES] = outcomes
    left = ps.splits_left
    try:
        result = consolidate(ps, candidates, method)
    finally:
        del derived[OUTCOMES]
    # Balanced and Strands answers read more than the first-fit replay the memo rests on.
    if isinstance(result, NoOp) and result.kind not in _UNKEPT and outcomes:
        base = outcomes[0]
        if ps.failed_splits.failed(ps.cluster, ps.options, candidates, base):
            splits = 0  # the split failed after this very what-if: never tried again
        elif left <= 0 and split.possible(ps, candidates) and not _hopeless(ps, candidates, base):
            splits = -1  # with a split left, one might have been tried
        else:
            splits = 0  # the replay gives the same pods to place: the same answer to split
        memo.keep_whatif(ps, candidates, result, outcomes, splits)
    return result
