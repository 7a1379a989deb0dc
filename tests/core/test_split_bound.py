"""The whole-node bound on splits and the memo's recheck of joined room: proofs never wrong.

``splitbound`` says "no two or more nodes holding these requests cost less than the budget";
these tests check it against brute force on small random catalogues, and on seeded clusters
check that every split attempt it lets consolidation skip would have failed.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.disruption import split, splitbound
from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.commands import METHOD_SINGLE, Command, NoOp
from karpenter.core.disruption.consolidation import _verdict, consolidate
from karpenter.core.disruption.context import DisruptionPass, new_pass
from karpenter.core.disruption.methods import consolidation_candidates, next_command
from karpenter.core.disruption.planner import name_replacements
from karpenter.core.disruption.retries import FailedSplits
from karpenter.core.disruption.simulation import reschedule
from karpenter.core.disruption.world import World
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.node import Node
from karpenter.core.model.pod import Pod
from tests.core.test_disruption_incremental import NOW, VARIANTS, _cluster, _options
from tests.support import builders as b

GIB = 2**30 * 1000


def _multisets(rows: list[tuple[float, int]], most: int) -> list[tuple[int, ...]]:
    return [
        combo
        for k in range(2, most + 1)
        for combo in itertools.combinations_with_replacement(range(len(rows)), k)
    ]


@pytest.mark.parametrize("seed", range(30))
def test_cover_two_is_the_cheapest_multiset_of_two_or_more(seed: int) -> None:
    """The dynamic program equals enumerating every multiset of two or more rows."""
    rng = random.Random(seed)
    rows = [(round(rng.uniform(0.1, 5), 3), rng.randint(1, 12)) for _ in range(rng.randint(1, 5))]
    need = rng.randint(1, 30)
    brute = min(
        (
            sum(rows[i][0] for i in combo)
            for combo in _multisets(rows, need + 2)
            if sum(rows[i][1] for i in combo) >= need
        ),
        default=math.inf,
    )
    assert splitbound.cover_two(rows, need) == pytest.approx(brute)


def _table(rng: random.Random) -> list[tuple[float, dict[str, int]]]:
    table = []
    for _ in range(rng.randint(2, 7)):
        cpu, gib = rng.randint(1, 16), rng.choice((1, 2, 4, 8))
        price = round(rng.uniform(0.02, 0.09) * cpu + rng.uniform(0.0, 0.02) * gib * cpu, 4)
        table.append(
            (price, {res.CPU: cpu * 1000 - 100, res.MEMORY: gib * cpu * GIB, res.PODS: 110_000})
        )
    return table


@pytest.mark.parametrize("seed", range(40))
def test_whole_node_floor_never_exceeds_a_real_set_of_nodes(seed: int) -> None:
    """No multiset of two or more types that holds the requests in total costs less than the
    floor, wherever the floor is below the budget, and none under the budget exists when the
    bound says so."""
    rng = random.Random(seed)
    table = _table(rng)
    bound = splitbound.WholeNodes(table)
    for _ in range(6):
        need = {
            res.CPU: rng.randint(1, 24) * 500,
            res.MEMORY: rng.randint(1, 40) * GIB // 2,
            res.PODS: rng.randint(1, 20) * 1000,
        }
        budget = rng.uniform(0.1, 3.0)
        sets = [
            sum(table[i][0] for i in combo)
            for combo in _multisets([(p, 0) for p, _ in table], 5)
            if res.fits(need, res.add(*(table[i][1] for i in combo)))
        ]
        cheapest = min(sets, default=math.inf)
        assert min(bound.floor(need, budget), budget) <= cheapest + 1e-12
        if not bound.may_undercut(need, budget):
            assert cheapest >= budget * (1 - splitbound.TIE)


def _split_fails(ps: DisruptionPass, group: list[Candidate]) -> bool:
    """Whether a split attempt for ``group`` (on a fresh record and limit) finds no command."""
    ps.failed_splits = FailedSplits()
    ps.splits_left = 1
    return isinstance(split.consolidate_split(ps, group, "multi"), NoOp)


def _fake_cluster(seed: int, nodes: int = 24) -> Cluster:
    """Full nodes of the fake catalogue (linear prices, 100m overhead): each the cheapest type
    holding its pods of whole CPUs, on-demand and spot."""
    rng = random.Random(seed)
    types = fake_instance_types(64)
    node_list: list[Node] = []
    pods: list[Pod] = []
    for i in range(nodes):
        shapes = [
            (rng.choice(("1", "2")), rng.choice(("128Mi", "256Mi")))
            for _ in range(rng.randint(3, 9))
        ]
        need = res.add(*(b.requests(cpu=c, memory=m, pods=1) for c, m in shapes))
        it = next(t for t in types if res.fits(need, t.allocatable))
        name = f"f-{i:03d}"
        ctype = "spot" if rng.random() < 0.3 else "on-demand"
        node_list.append(b.managed_node(name, it, zone="test-zone-1", capacity_type=ctype))
        pods += [b.bound(name, cpu=c, memory=m) for c, m in shapes]
    return b.cluster([b.nodepool()], types, nodes=tuple(node_list), pods=tuple(pods))


def _splits(cluster: Cluster, options: Options) -> tuple[int, int]:
    """Attempt a split for every group one replacement says no to; check those the bound
    rules out fail. Returns (ruled out, split)."""
    ps = new_pass(cluster, options, NOW)
    ranked = consolidation_candidates(ps)
    groups = [[c] for c in ranked] + [ranked[:k] for k in range(2, min(len(ranked), 8) + 1)]
    proven = succeeded = 0
    for group in groups:
        outcome = reschedule(ps.cluster, group, ps.states, ps.options, ps.reuse)
        if not outcome.claims or isinstance(_verdict(ps, group, "multi", outcome), Command):
            continue
        if not split.possible(ps, group):
            continue
        held = split.replaced(group, outcome)
        fails = _split_fails(ps, group)
        succeeded += not fails
        if split.hopeless(ps, held, sum(c.price for c in group)):
            proven += 1
            assert fails, [c.name for c in group]
    return proven, succeeded


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_split_the_bound_rules_out_fails(variant: str) -> None:
    """Wherever one replacement says no and the whole-node bound proves no split cheaper
    than the candidates, the split attempt (the cost pass's repack) finds no command
    (the tests' doubling catalogue, with spread, anti-affinity, limits, daemons, spot)."""
    options = replace(_options(variant), max_replacements=10)
    found = [_splits(_cluster(seed, variant, nodes=30, fill=12), options) for seed in range(2)]
    # guard: the groups include splits that succeed (the bound must let those through)
    assert sum(ok for _, ok in found) > 0 or variant in ("spot", "limits")


def test_a_split_the_bound_rules_out_fails_on_the_fake_catalogue() -> None:
    """As above on the fake catalogue, where whole CPUs make most splits hopeless: the bound
    rules many out and each of them fails."""
    proven = sum(_splits(_fake_cluster(seed), Options())[0] for seed in range(4))
    assert proven >= 10


def test_the_fake_catalogue_right_sized_node_needs_no_split_attempt() -> None:
    """Eight CPUs of pods on the fake catalogue: one 9-CPU node or any two nodes cost the
    same (whole CPUs, 100m overhead each), so no split can be cheaper than the node."""
    table = [
        (min(o.price for o in it.offerings), it.allocatable) for it in fake_instance_types(400)
    ]
    bound = splitbound.WholeNodes(table)
    nine = table[8][0]
    need = {res.CPU: 8000, res.MEMORY: 10 * GIB, res.PODS: 8000}
    assert not bound.may_undercut(need, nine)
    # a node one size larger than needed leaves room to undercut
    assert bound.may_undercut(need, table[9][0])


@pytest.mark.parametrize("seed", range(20))
def test_a_proof_holds_for_any_larger_requests(seed: int) -> None:
    """Once no split holding some requests can pay, none holding more can: the verdict
    memo keeps such answers while the requests only grow."""
    rng = random.Random(seed)
    table = [
        (min(o.price for o in it.offerings), it.allocatable)
        for it in fake_instance_types(rng.randint(4, 60))
    ]
    bound = splitbound.WholeNodes(table)
    for _ in range(30):
        small = {res.CPU: rng.randint(1, 40_000), res.MEMORY: rng.randint(1, 80) * GIB}
        large = {k: v + rng.randint(0, v) for k, v in small.items()}
        budget = rng.choice(table)[0]
        if not bound.may_undercut(small, budget):
            assert not bound.may_undercut(large, budget)


def _memo_checks(cluster: Cluster, options: Options) -> int:
    """Run a plan's world; before each command, check every kept single-node answer against a
    fresh pass on the same snapshot. Returns how many kept answers were checked."""
    # nodes an hour old: consolidation, not expiration, acts on them
    cluster = replace(cluster, nodes=tuple(replace(n, creation=NOW - 3600) for n in cluster.nodes))
    world = World(cluster, options, NOW)
    checked = counter = 0
    for _ in range(60):
        probe = world.next_pass()
        fresh = new_pass(world.cluster, options, NOW)
        by_name = {c.name: c for c in fresh.candidates}
        for c in list(world.candidates.values()):
            if c.name in by_name and world.memo.get(probe, [c]) is not None:
                checked += 1
                verdict = consolidate(fresh, [by_name[c.name]], METHOD_SINGLE)
                assert isinstance(verdict, NoOp), c.name
        ps = world.next_pass()
        command = next_command(ps)
        world.passed(ps)
        if command is None:
            break
        step = name_replacements(command, counter)
        counter += len(step.replacement_names)
        world.apply(command, step.replacement_names)
    return checked


@pytest.mark.parametrize("variant", ("plain", "daemonset", "spot"))
def test_every_kept_no_is_what_a_fresh_pass_answers(variant: str) -> None:
    """Across a plan (nodes leaving, receiving pods, replacements joining with room), every
    single-node "no" the verdict memo still holds is a "no" of a fresh pass on the same
    snapshot, including the prefilter answers rechecked against joined nodes' room."""
    cluster = _cluster(5, variant, nodes=60, fill=12)
    assert _memo_checks(cluster, _options(variant)) > 0


def _bench_like(seed: int, nodes: int = 60) -> Cluster:
    """The disruption benchmark's shape on the fake catalogue: most nodes right-sized for
    6-10 pods of mixed shapes, every fifth 3.5 times too large for its 3 pods."""
    rng = random.Random(seed)
    types = fake_instance_types(64)
    node_list: list[Node] = []
    pods: list[Pod] = []
    for i in range(nodes):
        over = i % 5 == 0
        shapes = [
            (rng.choice(("100m", "250m", "500m", "1", "1500m")), rng.choice(("512Mi", "2Gi")))
            for _ in range(3 if over else rng.randint(6, 10))
        ]
        need = res.add(*(b.requests(cpu=c, memory=m, pods=1) for c, m in shapes))
        if over:
            need = {k: 7 * v // 2 for k, v in need.items()}
        it = next(t for t in types if res.fits(need, t.allocatable))
        name = f"f-{i:03d}"
        ctype = "spot" if rng.random() < 0.3 else "on-demand"
        node_list.append(b.managed_node(name, it, zone="test-zone-1", capacity_type=ctype))
        pods += [b.bound(name, cpu=c, memory=m) for c, m in shapes]
    return b.cluster([b.nodepool()], types, nodes=tuple(node_list), pods=tuple(pods))


def test_every_kept_no_is_what_a_fresh_pass_answers_on_the_fake_catalogue() -> None:
    """As above on the benchmark's shape of cluster, where most answers are prefilter proofs
    resting on pods no other node has room for, rechecked as replacements join."""
    assert sum(_memo_checks(_bench_like(seed), Options()) for seed in range(3)) > 20
