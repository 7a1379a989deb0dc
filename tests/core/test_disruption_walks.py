"""A plan's shortcuts through its passes give the orders and answers of fresh passes.

A plan's world keeps, between commands, what each pass would otherwise build again: batch
delete's order of candidates by waste (``ranking.CandidateIndex.wasteful``), and the single
candidates it passes over because a kept "no" proves they cannot be deleted alone
(``ranking.CandidateIndex.known``); and the verdict memo's prefilter answers that a node
joining with room for none of their still-homeless pods leaves unchecked; and a split's
simulation run on from the first fit of the what-if before it; the prefilter's first nodes
with room per pod shape, kept from pass to pass; and the free-capacity index's "no node has
room" learnt from what-ifs' copies and kept across joins. Each is checked
here against the plain computation on a fresh pass over the same snapshot, after every command
of plans on seeded clusters.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from karpenter.core.disruption import repack
from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.commands import METHOD_MULTI, METHOD_SINGLE, NoOp
from karpenter.core.disruption.consolidation import consolidate
from karpenter.core.disruption.context import DisruptionPass, new_pass
from karpenter.core.disruption.methods import consolidation_candidates, next_command
from karpenter.core.disruption.planner import name_replacements
from karpenter.core.disruption.simulation import Outcome, reschedule, reschedule_kept
from karpenter.core.disruption.world import World
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.nodepool import Budget, Disruption
from karpenter.core.provisioning.freeindex import FreeIndex
from tests.core.test_disruption_incremental import NOW, _cluster, _options
from tests.core.test_split_bound import _bench_like
from tests.support import builders as b


def _passes(
    cluster: Cluster, options: Options, most: int = 80
) -> Iterator[tuple[World, DisruptionPass]]:
    """Each pass of a plan's world (before its command is applied)."""
    cluster = replace(cluster, nodes=tuple(replace(n, creation=NOW - 3600) for n in cluster.nodes))
    world = World(cluster, options, NOW)
    counter = 0
    for _ in range(most):
        ps = world.next_pass()
        yield world, ps
        command = next_command(ps)
        world.passed(ps)
        if command is None:
            return
        step = name_replacements(command, counter)
        counter += len(step.replacement_names)
        world.apply(command, step.replacement_names)


_CLUSTERS = [
    pytest.param(lambda s=seed: (_bench_like(s), Options()), id=f"bench-{seed}")
    for seed in range(3)
] + [
    pytest.param(lambda v=v: (_cluster(5, v, nodes=60, fill=12), _options(v)), id=v)
    for v in ("plain", "daemonset", "spot")
]


@pytest.mark.parametrize("make", _CLUSTERS)
def test_batch_delete_order_is_the_plain_sort_after_every_command(
    make: Callable[[], tuple[Cluster, Options]],
) -> None:
    """The index's most-waste-first order equals sorting a fresh pass's candidates by waste,
    pass after pass, as commands remove nodes, move pods and add replacements."""
    cluster, options = make()
    seen = 0
    for world, _ps in _passes(cluster, options):
        fresh = new_pass(world.cluster, options, NOW)
        plain = repack.wasteful(consolidation_candidates(fresh))
        assert world.index is not None
        assert [c.name for c in world.index.wasteful()] == [c.name for c in plain]
        seen += len(plain)
    assert seen > 0


def _deletes_alone(ps: DisruptionPass, c: Candidate) -> bool:
    outcome = reschedule(ps.cluster, [c], ps.states, ps.options, ps.reuse)
    return not (outcome.claims or outcome.failures or outcome.homeless or outcome.uninitialized)


def _batch_checks(cluster: Cluster, options: Options) -> int:
    """Check batch delete's shortcut on every pass of a plan; returns how many candidates it
    passed over."""
    skipped = 0
    for world, _ps in _passes(cluster, options):
        assert world.index is not None
        fresh = new_pass(world.cluster, options, NOW)
        by_name = {c.name: c for c in fresh.candidates}
        for c in world.index.wasteful():
            if world.index.known(c.name):
                skipped += 1
                assert not _deletes_alone(fresh, by_name[c.name]), c.name
        probe = world.next_pass()
        shortcut = repack.batch_delete(probe, world.index.wasteful(), world.index.known)
        plain = repack.batch_delete(fresh, repack.wasteful(consolidation_candidates(fresh)))
        assert (shortcut and shortcut.names) == (plain and plain.names)
    return skipped


@pytest.mark.parametrize("make", _CLUSTERS)
def test_batch_delete_passes_over_only_what_cannot_be_deleted_alone(
    make: Callable[[], tuple[Cluster, Options]],
) -> None:
    """Every candidate batch delete passes over on a kept single-node "no" could not be
    deleted alone on a fresh pass, and the command it gathers is a fresh pass's."""
    _batch_checks(*make())


def test_batch_delete_does_pass_over_candidates() -> None:
    """Guard for the test above: the shortcut is taken on these clusters."""
    assert _batch_checks(_bench_like(7, nodes=150), Options()) > 20


def _kept_checks(cluster: Cluster, options: Options) -> tuple[int, int]:
    """On every pass of a plan, judge afresh every candidate set (one node or several) the
    verdict memo answers for; returns how many answers were checked and how many joins left
    a checked prefilter answer unchecked."""
    checked = 0
    world: World | None = None
    for world, _ps in _passes(cluster, options):
        probe = world.next_pass()
        fresh = new_pass(world.cluster, options, NOW)
        by_name = {c.name: c for c in fresh.candidates}
        for key in sorted(world.memo._entries):
            mine = [world.candidates[name] for name in key if name in world.candidates]
            if len(mine) != len(key) or world.memo.get(probe, mine) is None:
                continue  # not asked as such, or asked again (splits left) in a fresh pass
            checked += 1
            method = METHOD_MULTI if len(key) > 1 else METHOD_SINGLE
            verdict = consolidate(fresh, [by_name[name] for name in key], method)
            assert isinstance(verdict, NoOp), key
    return checked, world.memo.work.unmoved if world is not None else 0


@pytest.mark.parametrize("make", _CLUSTERS)
def test_every_kept_answer_is_a_fresh_no(make: Callable[[], tuple[Cluster, Options]]) -> None:
    """Every answer the verdict memo still gives, for one candidate or several, is a "no" of
    a fresh pass on the same snapshot, including prefilter answers a join left unchecked."""
    assert _kept_checks(*make())[0] > 0


def test_joins_do_leave_checked_answers_as_they_were() -> None:
    """Guard for the test above: on the benchmark's shape of cluster, joins that leave a
    checked prefilter answer's bound as it was happen (and are not checked again). (Without
    the stranding check, whose refusals leave this plan with fewer replacements joining.)"""
    assert _kept_checks(_bench_like(7, nodes=150), Options(stranding_check=False))[1] > 10


def _seen(outcome: Outcome) -> tuple[object, ...]:
    return (
        tuple(
            (c.launch, tuple(it.name for it in c.instance_types), tuple(p.key for p in c.pods))
            for c in outcome.claims
        ),
        outcome.moves,
        outcome.failures,
        outcome.uninitialized,
        outcome.homeless,
        outcome.trace,
    )


def _split_checks(variant: str, seed: int) -> int:
    """Compare kept and fresh what-ifs for the ranked candidates alone and for prefixes of
    them; returns for how many the cost pass changed the first fit's outcome."""
    cluster = _cluster(seed, variant, nodes=30, fill=12)
    ps = new_pass(cluster, _options(variant), NOW)
    ranked = consolidation_candidates(ps)
    groups = [[c] for c in ranked] + [ranked[:k] for k in range(2, min(len(ranked), 9))]
    changed = 0
    for group in groups:
        args = (ps.cluster, group, ps.states, ps.options, ps.reuse)
        first, repacked = reschedule_kept(*args)
        assert _seen(first) == _seen(reschedule(*args))
        split = repacked()
        assert _seen(split) == _seen(reschedule(*args, repack=True))
        changed += _seen(split) != _seen(first)
    return changed


_VARIANTS = ("plain", "spread", "anti", "limits", "daemonset", "spot")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("variant", _VARIANTS)
def test_a_split_from_the_kept_first_fit_equals_one_simulated_from_the_start(
    variant: str, seed: int
) -> None:
    """The cost pass run over a what-if's kept first fit gives the outcome of a repacking
    what-if simulated from the start, and the first fit that of a plain what-if."""
    _split_checks(variant, seed)


def test_the_split_checks_see_the_cost_pass_change_outcomes() -> None:
    """Guard for the test above: on some of the what-ifs compared, the cost pass does change
    the first fit's outcome (so a kept pass that skipped it would be caught)."""
    assert sum(_split_checks(v, s) for v in ("plain", "spread", "daemonset") for s in range(3)) > 5


def _room_checks(cluster: Cluster, options: Options) -> int:
    """On every pass of a plan, compare the prefilter's kept lists of first nodes with room
    per pod shape with a scan of the snapshot; returns how many lists were carried over a
    command."""
    carried = 0
    for world, ps in _passes(cluster, options):
        base = ps.reuse.snapshot(ps.cluster)
        for shape, (found, complete) in sorted(world.room_for.items()):
            every = [base.states[i].name for i in base.free.candidates(0, dict(shape))]
            assert found == (every if complete else every[: len(found)]), shape
            carried += 1
    return carried


@pytest.mark.parametrize("make", _CLUSTERS)
def test_kept_first_nodes_with_room_are_a_fresh_scan(
    make: Callable[[], tuple[Cluster, Options]],
) -> None:
    """The first nodes with room per pod shape that the world keeps from pass to pass (nodes
    leaving, filling, joining) are those a scan of the current snapshot finds."""
    _room_checks(*make())


def test_first_nodes_with_room_are_carried() -> None:
    """Guard for the test above: lists are carried over commands on the benchmark's shape."""
    assert _room_checks(_bench_like(7, nodes=150), Options()) > 50


def test_free_index_copies_tell_the_original_only_what_holds_there() -> None:
    """Scans of copies that leave nodes out (what-ifs), before and after they place pods,
    teach the original index no "no room" it would not find itself; joins keep what the new
    node has no room for: every scan of the original equals the plain scan."""
    rng = random.Random(21)
    # Room for large pods only among the first nodes: later scans mostly find none.
    rooms = [
        {res.CPU: 2500 if i < 60 and i % 7 == 0 else 100, res.MEMORY: i % 6, res.PODS: 1}
        for i in range(200)
    ]
    index = FreeIndex(rooms)
    requests = [{res.CPU: c, res.MEMORY: m, res.PODS: 1} for c in (500, 2000) for m in (1, 4)]
    told = 0
    for step in range(1500):
        op = rng.random()
        if op < 0.5:
            roomy = [i for i, r in enumerate(rooms) if r[res.CPU] >= 2000]
            out = rng.sample(range(len(rooms)), rng.randrange(1, 4))
            start = rng.randrange(len(rooms))
            kind = rng.choice(("plain", "leave out", "fill")) if roomy else "plain"
            if kind == "leave out":  # the nodes with room from some point on
                start = rng.choice(roomy)
                out += [i for i in roomy if i >= start]
            elif kind == "fill":  # the last node with room, filled by the what-if
                start = roomy[-1]
            copy = index.without(sorted(set(out)))
            if kind == "fill":
                mine = dict(rooms[start])
                copy.replace(start, mine)
                mine[res.CPU] = 0
                copy.update(start)
            before = dict(index._empty)
            request = rng.choice(requests)
            list(copy.candidates(start, request))
            told += index._empty != before
            plain = [i for i in range(start, len(rooms)) if res.fits(request, rooms[i])]
            assert list(index.candidates(start, request)) == plain
        elif op < 0.6:
            i = rng.randrange(len(rooms))
            rooms.insert(i, {res.CPU: rng.choice((100, 2500)), res.MEMORY: 5, res.PODS: 1})
            index.insert(i, rooms[i])
        elif op < 0.8:
            i = rng.randrange(len(rooms))
            rooms[i][res.CPU] = max(0, rooms[i][res.CPU] - 400)  # a pod moved there
            index.update(i)
        if step % 5 == 0:  # (each scan of the original teaches it too: not every step)
            for request in requests:
                start = rng.randrange(len(rooms))
                plain = [i for i in range(start, len(rooms)) if res.fits(request, rooms[i])]
                assert list(index.candidates(start, request)) == plain
    assert told > 2  # copies taught the original (most repeat what it knows already)


def test_batch_delete_takes_more_than_a_walk_at_once_when_all_can_go() -> None:
    """Fifty lightly used nodes whose pods all fit on the fuller ones go in one command, not
    in rounds of MAX_WALK; when seventy cannot all go, the first half of them can."""
    it = next(t for t in b.catalog() if t.name == "m-4x")
    nodes = [b.managed_node(f"full-{i:02d}", it) for i in range(30)]
    nodes += [b.managed_node(f"light-{i:02d}", it) for i in range(50)]
    pods = [b.bound(f"full-{i:02d}", cpu="1500m", memory="1Gi") for i in range(30)]
    pods += [b.bound(f"light-{i:02d}", cpu="1", memory="1Gi") for i in range(50)]
    pool = b.nodepool(disruption=Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("100%"),)))
    cluster = b.cluster([pool], nodes=tuple(nodes), pods=tuple(pods))
    ps = new_pass(cluster, Options(), NOW + 3600)
    light = [c for c in ps.candidates if c.name.startswith("light-")]
    assert len(light) == 50 > repack.MAX_WALK
    command = repack.batch_delete(ps, light)
    assert command is not None and sorted(command.names) == sorted(c.name for c in light)
    # the fuller nodes hold two light pods each: seventy would not fit
    crowded = b.cluster(
        [pool],
        nodes=(*nodes, *(b.managed_node(f"more-{i:02d}", it) for i in range(20))),
        pods=(*pods, *(b.bound(f"more-{i:02d}", cpu="1", memory="1Gi") for i in range(20))),
    )
    ps = new_pass(crowded, Options(), NOW + 3600)
    light = [c for c in ps.candidates if c.name.startswith(("light-", "more-"))]
    command = repack.batch_delete(ps, light)
    # all seventy cannot go; the first half of them can, in one command
    assert command is not None and list(command.names) == [c.name for c in light[:35]]
