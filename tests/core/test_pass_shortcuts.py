"""Shortcuts on the what-if hot path give what the plain computation gives.

A plan asks the same small questions thousands of times: a claim's launch options (the
cheapest types of its mask, kept per catalogue: ``Catalog.cheapest``), the prefilter's answer
where only its truth matters (``prefilter.refuses``, no message written), the split bound's
answer to the question it was just asked (``WholeNodes.floor``), the free-capacity index's
block summaries after a node's room shrank (``FreeIndex._shrunk`` recomputes only what the old
room could have set), the candidate index's filing when a memo report changes nothing, and
the recheck of a kept prefilter answer when no joined node has room for its homeless pods
(``VerdictMemo._as_kept``: the residual it was kept with).
Each is checked here against the plain computation on seeded inputs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.disruption import prefilter
from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.context import DisruptionPass, new_pass
from karpenter.core.disruption.ranking import CandidateIndex
from karpenter.core.disruption.splitbound import WholeNodes
from karpenter.core.disruption.verdicts import VerdictMemo, _Entry, _prefilter_splits, room_for
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.provisioning.catalog import Catalog
from karpenter.core.provisioning.freeindex import _NONE, FreeIndex
from karpenter.core.scheduling.requirements import Requirement, Requirements
from tests.core.test_disruption_incremental import NOW, _cluster, _options
from tests.core.test_disruption_walks import _passes
from tests.core.test_split_bound import _bench_like

_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
_CTYPES = (lbl.CAPACITY_TYPE_SPOT, lbl.CAPACITY_TYPE_ON_DEMAND)


def _plain_cheapest(
    catalog: Catalog, reqs: Requirements, mask: int, limit: int
) -> tuple[list[tuple[int, object]], frozenset[str]]:
    """The claim's types in price order, each once, at most ``limit`` (as finalize truncates)."""
    priced = catalog.priced(reqs)
    out: list[tuple[int, object]] = []
    seen: set[int] = set()
    for index, offer in priced.order:
        if mask >> index & 1 and index not in seen:
            seen.add(index)
            out.append((index, offer))
            if len(out) == limit:
                break
    ctypes = frozenset().union(*(priced.capacity_types[i] for i, _ in out))
    return out, ctypes


def test_launch_options_are_the_plain_truncation() -> None:
    """A catalogue's kept launch options for any mask, zones, capacity types and limit are the
    plain truncation of its price order, with the types and pins built from it, on every ask."""
    rng = random.Random(5)
    catalog = Catalog(fake_instance_types(120))
    asked = 0
    for _ in range(600):
        zones = frozenset(rng.sample(_ZONES, rng.randint(1, 3)))
        ctypes = frozenset(rng.sample(_CTYPES, rng.randint(1, 2)))
        reqs = Requirements(
            (
                Requirement(lbl.ZONE, False, zones),
                Requirement(lbl.CAPACITY_TYPE, False, ctypes),
            )
        )
        low = rng.randrange(120)
        mask = sum(1 << i for i in range(low, 120) if rng.random() < 0.7)
        limit = rng.choice((0, 1, 5, 60, 200))
        found = catalog.cheapest(reqs, mask, limit)
        order, usable = _plain_cheapest(catalog, reqs, mask, limit)
        assert list(found.order) == order
        assert found.capacity_types == usable
        assert found.types == tuple(catalog.types[i] for i, _ in order)
        names = frozenset(it.name for it in found.types)
        assert found.pinned == Requirements(
            (
                Requirement(lbl.INSTANCE_TYPE, False, names),
                Requirement(lbl.CAPACITY_TYPE, False, usable),
            )
        )
        asked += bool(order)
    assert asked > 300


_PASSES = [
    pytest.param(lambda s=seed: (_bench_like(s), Options()), id=f"bench-{seed}")
    for seed in range(2)
] + [
    pytest.param(lambda v=v: (_cluster(5, v, nodes=60, fill=12), _options(v)), id=v)
    for v in ("plain", "spot")
]


@pytest.mark.parametrize("make", _PASSES)
def test_refuses_is_the_truth_of_the_verdict(make: Callable[[], tuple[Cluster, Options]]) -> None:
    """``refuses`` answers as ``bool(verdict)`` for candidate sets and residuals of every
    size, with splits left in the pass and without."""
    cluster, options = make()
    ps = new_pass(cluster, options, NOW)
    rng = random.Random(3)
    candidates = ps.candidates
    answers = {True: 0, False: 0}
    for _ in range(400):
        chosen = rng.sample(candidates, rng.randint(1, min(4, len(candidates))))
        residual = {
            res.CPU: rng.choice((0, 100, 900, 4000, 30_000, 500_000)),
            res.MEMORY: rng.choice((0, 2**30, 2**34, 2**38)) * 1000,
            res.PODS: rng.choice((-1, 0, 3_000)),
        }
        ps.splits_left = rng.choice((0, 2))
        said = prefilter.refuses(ps, chosen, residual)
        assert said == bool(prefilter.verdict(ps, chosen, residual))
        answers[said] += 1
    assert answers[True] > 20 and answers[False] > 20


def test_split_bound_answers_as_a_fresh_one() -> None:
    """The split bound gives the answer a fresh bound gives, asked again or anew."""
    table = [(it.offerings[0].price, it.allocatable) for it in fake_instance_types(64)]
    kept = WholeNodes(table)
    rng = random.Random(9)
    questions: list[tuple[dict[str, int], float]] = []
    for _ in range(300):
        if questions and rng.random() < 0.4:
            requests, budget = questions[-1]  # the same question twice in a row
        else:
            requests = {
                res.CPU: rng.randrange(100, 40_000),
                res.MEMORY: rng.randrange(1, 80) * 2**30 * 1000,
                res.PODS: rng.randrange(1, 100) * 1000,
            }
            budget = rng.uniform(0.5, 30.0)
        questions.append((requests, budget))
        assert kept.floor(requests, budget) == WholeNodes(table).floor(requests, budget)
        other_budget = WholeNodes(table).floor(requests, budget / 3)
        assert kept.floor(requests, budget / 3) == other_budget
        same_but_cpu = {**requests, res.CPU: requests[res.CPU] + 1000}
        fresh = WholeNodes(table).floor(same_but_cpu, budget)
        assert kept.floor(same_but_cpu, budget) == fresh


def _summaries(index: FreeIndex) -> tuple[object, ...]:
    return (index._room, index._small, index._front, index._large)


def _rebuilt(rooms: list[dict[str, int]], out: set[int]) -> FreeIndex:
    none = {res.CPU: _NONE, res.MEMORY: _NONE, res.PODS: _NONE}
    return FreeIndex([none if i in out else room for i, room in enumerate(rooms)])


def test_free_index_block_summaries_equal_a_rebuild() -> None:
    """After every change of room (mostly shrinking, as placements do; sometimes growing),
    in the index and in copies that leave nodes out, the block maxima and fronts equal those of
    an index built afresh over the same rooms."""
    rng = random.Random(17)
    rooms = [
        {res.CPU: rng.choice((0, 100, 500, 2500)), res.MEMORY: rng.randrange(8), res.PODS: 2}
        for _ in range(150)
    ]
    index = FreeIndex(rooms)
    shrank = 0
    for _ in range(40):
        out = set(rng.sample(range(len(rooms)), rng.randint(0, 12)))
        copy = index.without(sorted(out))
        assert _summaries(copy) == _summaries(_rebuilt(rooms, out))
        mine = [dict(room) for room in rooms]
        for _ in range(30):
            i = rng.randrange(len(rooms))
            if i in out:
                continue
            copy.replace(i, mine[i])
            grow = rng.random() < 0.1
            for key, step in ((res.CPU, 100), (res.MEMORY, 1), (res.PODS, 1)):
                if rng.random() < 0.6:
                    mine[i][key] = mine[i][key] + step if grow else max(0, mine[i][key] - step)
            shrank += not grow
            copy.update(i)
            assert _summaries(copy) == _summaries(_rebuilt(mine, out))
        i = rng.randrange(len(rooms))  # the original's own rooms change too
        rooms[i][res.CPU] = max(0, rooms[i][res.CPU] - 400)
        index.update(i)
        assert _summaries(index) == _summaries(_rebuilt(rooms, set()))
    assert shrank > 500


def _plain_walk(index: CandidateIndex, known: dict[str, bool], splits_left: bool) -> list[str]:
    """The walk an index told only the final answers gives (filed once each, from scratch)."""
    fresh = CandidateIndex(list(index.ranked()), ())
    for name, awaits in known.items():
        fresh.learned(name, awaits)
    return [c.name for c in fresh.round_robin(lambda _: True, lambda: splits_left)]


def test_candidate_index_walks_as_one_told_only_the_final_answers() -> None:
    """Reports that change nothing (forgetting what is not kept, learning what is kept
    already) leave the walk exactly as an index told only the final answers walks it."""
    cluster = _bench_like(4, nodes=80)
    ps = new_pass(cluster, Options(), NOW)
    index = CandidateIndex(ps.candidates, ())
    names = [c.name for c in index.ranked()]
    rng = random.Random(2)
    known: dict[str, bool] = {}
    for _ in range(2000):
        name = rng.choice(names)
        if rng.random() < 0.5:
            awaits = rng.random() < 0.3
            index.learned(name, awaits)
            known[name] = awaits
        else:
            index.forgot(name)
            known.pop(name, None)
        if rng.random() < 0.05:
            for splits_left in (False, True):
                walk = index.round_robin(lambda _: True, (lambda: True) if splits_left else bool)
                assert [c.name for c in walk] == _plain_walk(index, known, splits_left)
    assert len(names) > 40


def _plain_still(ps: DisruptionPass, candidates: Sequence[Candidate], e: _Entry) -> bool:
    """The prefilter answer's recheck computed in full (``VerdictMemo._still`` without its
    shortcut), on the entry given (which it updates as the memo does)."""
    free = ps.cache["free"]
    names = [name for name in e.joined if name in free]
    rooms = [free[name] for name in names]
    housed = [r for r in e.homeless if any(room_for(r, room) for room in rooms)]
    kept = [r for r in e.homeless if not any(room_for(r, room) for room in rooms)]
    spill = res.floor_zero(res.subtract(res.add(*housed), res.add(*rooms)))
    bound = res.maximum((e.excess, res.add(*kept, spill)))
    if not prefilter.verdict(ps, candidates, bound):
        return False
    e.kept, e.housed_fit, e.pending = kept, not any(spill.values()), False
    e.splits = _prefilter_splits(ps, candidates, bound)
    pairs = zip(names, rooms, strict=True)
    e.joined = [n for n, room in pairs if any(room_for(r, room) for r in housed)]
    return True


def _fields(e: _Entry) -> tuple[object, ...]:
    return (e.kept, e.housed_fit, e.pending, e.splits, e.joined)


def test_prefilter_rechecks_answer_as_computed_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every recheck of a kept prefilter answer after joins (with no joined node left with
    room for its homeless pods, or with some) answers and updates the entry as the full
    computation does, through plans on the benchmark's shape of cluster."""
    real = VerdictMemo._still
    seen = {"whole": 0, "housed": 0}

    def checked(
        memo: VerdictMemo, ps: DisruptionPass, candidates: Sequence[Candidate], e: _Entry
    ) -> bool:
        plain = replace(e, kept=list(e.kept), joined=list(e.joined))
        expected = _plain_still(ps, candidates, plain)
        free = ps.cache["free"]
        rooms = [free[name] for name in e.joined if name in free]
        housed = any(room_for(r, room) for r in e.homeless for room in rooms)
        seen["housed" if housed else "whole"] += 1
        kept_with = res.maximum((e.excess, res.add(*e.homeless)))  # every homeless pod whole
        assert e.full_splits == _prefilter_splits(ps, candidates, kept_with)
        answer = real(memo, ps, candidates, e)
        assert answer == expected
        if answer:
            assert _fields(e) == _fields(plain)
        return answer

    monkeypatch.setattr(VerdictMemo, "_still", checked)
    for seed in range(2):
        for _world, _ps in _passes(_bench_like(seed, nodes=250), Options(), most=300):
            pass
    assert seen["whole"] > 20 and seen["housed"] > 5


def test_cheapest_type_holding_a_residual_is_the_plain_scan() -> None:
    """The prefilter's cheapest row holding a residual, scanning from the first row whose
    allocatable (or an earlier row's) reaches every requested amount, is the first row of a
    plain scan, on price tables whose rows grow in no particular order."""
    rng = random.Random(11)
    ps = new_pass(_bench_like(1), Options(), NOW)
    found = 0
    for _ in range(30):
        table = sorted(
            (
                rng.uniform(0.1, 50.0),
                {
                    res.CPU: rng.randrange(1, 64) * 1000,
                    res.MEMORY: rng.randrange(1, 256) * 2**30 * 1000,
                    **(
                        {"nvidia.com/gpu": rng.randrange(1, 4) * 1000} if rng.random() < 0.2 else {}
                    ),
                },
            )
            for _ in range(rng.randint(1, 60))
        )
        ps.price_table, ps.price_reach = table, None
        for _ in range(40):
            requests = {
                res.CPU: rng.randrange(0, 64) * 1000,
                res.MEMORY: rng.randrange(0, 256) * 2**30 * 1000,
                res.PODS: 0,
                **({"nvidia.com/gpu": rng.randrange(1, 3) * 1000} if rng.random() < 0.1 else {}),
            }
            plain = next((p for p, a in table if res.fits(requests, a)), None)
            assert prefilter._scan(ps, requests) == plain
            found += plain is not None
    assert found > 300


def _plain_homeless(
    ps: DisruptionPass, candidates: Sequence[Candidate]
) -> tuple[list[res.Resources], list[prefilter.Shape], list[tuple[str, int]]]:
    """Each pod of the candidates, in order, whose every node with room (a full scan of the
    snapshot) is a candidate; and the sum of their requests, key order included."""
    base = ps.reuse.snapshot(ps.cluster)
    own = {c.name for c in candidates}
    homeless = []
    for c in candidates:
        for p in c.pods:
            rooms = [base.states[i].name for i in base.free.candidates(0, p.requests)]
            if all(name in own for name in rooms):
                homeless.append(p.requests)
    shapes = [tuple(sorted(r.items())) for r in homeless]
    return homeless, shapes, list(res.add(*homeless).items())


@pytest.mark.parametrize("make", _PASSES)
def test_homeless_pods_are_a_full_scans(make: Callable[[], tuple[Cluster, Options]]) -> None:
    """The prefilter's pods without room elsewhere (each shape asked once per set, from the
    kept first nodes with room, scanning only when those cannot answer), their shapes and
    sum are a full scan's, on every pass of a plan and for candidate sets of every size."""
    rng = random.Random(11)
    cluster, options = make()
    asked = 0
    for _, ps in _passes(cluster, options, most=25):
        candidates = list(ps.candidates)
        for _ in range(12):
            chosen = rng.sample(candidates, rng.randint(1, min(40, len(candidates))))
            homeless, shapes, together = prefilter._homeless(ps, chosen)
            plain = _plain_homeless(ps, chosen)
            assert (homeless, shapes, list(together.items())) == plain
            asked += bool(homeless)
    assert asked > 50
