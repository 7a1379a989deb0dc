"""The disruption planner's shortcuts change its speed, never its answers.

A plan reuses solver set-up across what-if solves (and from one pass to the next for nodes
whose objects did not change), keeps the candidates of unchanged nodes between passes, prunes
what-ifs with cheap bounds, and scans existing nodes through a free-capacity index. Each
shortcut is checked here against the plain computation on seeded random clusters (spread,
anti-affinity, limits, daemonsets, spot):
- a plan equals re-deciding every pass from scratch (no survey memo, fresh set-up);
- a what-if with excluded nodes equals a solve on the cluster with those nodes removed;
- whenever the prefilter says "cannot", the full simulation says no as well;
- the free-capacity index yields exactly the nodes a plain scan would.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from karpenter.core.disruption.commands import METHOD_MULTI, NoOp
from karpenter.core.disruption.consolidation import consolidate
from karpenter.core.disruption.context import new_pass
from karpenter.core.disruption.methods import consolidation_candidates
from karpenter.core.disruption.planner import (
    Plan,
    Step,
    apply,
    decide,
    name_replacements,
    plan,
)
from karpenter.core.disruption.prefilter import SPOT_TO_SPOT_DISABLED, cannot_consolidate
from karpenter.core.disruption.retries import FailedSplits
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.node import Node
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import Reuse
from karpenter.core.provisioning.freeindex import FreeIndex
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import solve
from tests.support import builders as b

NOW = 1_800_000_000.0
ZONES = ("zone-a", "zone-b", "zone-c")
SHAPES = (("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"), ("1500m", "2Gi"), ("2", "3Gi"))
VARIANTS = ("plain", "spread", "anti", "limits", "daemonset", "spot")


def _cluster(seed: int, variant: str, nodes: int = 24, fill: int = 4) -> Cluster:
    """A seeded cluster: right-sized nodes, a third of them oversized, pods of mixed shapes."""
    rng = random.Random(seed)
    types = b.catalog()
    node_list: list[Node] = []
    pods: list[Pod] = []
    for i in range(nodes):
        it = types[rng.randrange(1, len(types))] if i % 3 == 0 else types[rng.randrange(0, 3)]
        ctype = "spot" if variant == "spot" and rng.random() < 0.6 else "on-demand"
        name = f"n-{i:03d}"
        node_list.append(b.managed_node(name, it, zone=ZONES[i % 3], capacity_type=ctype))
        room = it.allocatable[res.CPU] - 200
        for _ in range(rng.randrange(0, fill)):
            cpu, mem = rng.choice(SHAPES)
            need = res.parse({"cpu": cpu})[res.CPU]
            if need > room:
                break
            room -= need
            kw: dict[str, Any] = {}
            app = rng.choice(("web", "api", "db"))
            if variant == "spread" and app == "web":
                kw["topology_spread"] = (b.spread("topology.kubernetes.io/zone", 2),)
            if variant == "anti" and app == "db":
                kw["required_anti_affinity"] = (
                    b.affinity_term("kubernetes.io/hostname", app="db"),
                )
            pods.append(b.bound(name, cpu=cpu, memory=mem, labels={"app": app}, **kw))
    pool = b.nodepool()
    if variant == "limits":
        pool = replace(pool, limits=res.parse({"cpu": "60"}))
    extra: dict[str, object] = {}
    if variant == "daemonset":
        extra["daemonsets"] = (b.daemonset("agent", cpu="100m", memory="64Mi"),)
    return b.cluster([pool], nodes=tuple(node_list), pods=tuple(pods), **extra)  # type: ignore[arg-type]


def _options(variant: str) -> Options:
    return Options(spot_to_spot_consolidation=variant == "spot")


def _naive_plan(cluster: Cluster, options: Options) -> list[Step]:
    """Decide every pass from scratch: no survey memo, fresh solver set-up (only the record
    of failed splits goes from pass to pass, as the controller keeps it)."""
    steps: list[Step] = []
    counter = 0
    failed = FailedSplits()
    for _ in range(200):
        command, _ps = decide(
            cluster, options, NOW, assume_consolidate_after_elapsed=True, failed_splits=failed
        )
        if command is None:
            break
        step = name_replacements(command, counter)
        counter += len(step.replacement_names)
        steps.append(step)
        cluster = apply(cluster, step, NOW)
    return steps


def _summary(steps: list[Step] | tuple[Step, ...]) -> list[tuple[object, ...]]:
    return [
        (
            s.command.method,
            s.command.names,
            tuple(
                (r.launch, tuple(it.name for it in r.instance_types))
                for r in s.command.replacements
            ),
            s.command.moves,
        )
        for s in steps
    ]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", range(4))
def test_plan_equals_deciding_every_pass_from_scratch(variant: str, seed: int) -> None:
    cluster = _cluster(seed, variant)
    options = _options(variant)
    result: Plan = plan(cluster, options, NOW)
    assert _summary(result.steps) == _summary(_naive_plan(cluster, options))


@pytest.mark.parametrize("variant", ("plain", "spot", "daemonset", "spread"))
def test_dense_plan_equals_deciding_every_pass_from_scratch(variant: str) -> None:
    """Full nodes: most what-ifs fail or are pruned; prototypes carry over between passes."""
    cluster = _cluster(5, variant, nodes=60, fill=12)
    options = _options(variant)
    assert _summary(plan(cluster, options, NOW).steps) == _summary(_naive_plan(cluster, options))


def test_the_seeded_clusters_do_consolidate() -> None:
    """Guard for the test above: equality of two empty plans would prove nothing."""
    commands = sum(
        len(plan(_cluster(s, v), _options(v), NOW).steps) for s in range(4) for v in VARIANTS
    )
    assert commands >= 40


def _placements(results: Results) -> tuple[object, ...]:
    return (
        sorted((node, sorted(p.key for p in pods)) for node, pods in results.existing),
        sorted(
            (c.launch.instance_type, c.launch.zone, sorted(p.key for p in c.pods))
            for c in results.new_claims
        ),
        sorted(results.unschedulable),
    )


@pytest.mark.parametrize("variant", ("plain", "spread", "anti", "limits", "daemonset"))
def test_excluding_nodes_equals_removing_them(variant: str) -> None:
    cluster = _cluster(7, variant, nodes=30)
    rng = random.Random(3)
    reuse = Reuse()
    names = [n.name for n in cluster.nodes]
    for _ in range(12):
        gone = frozenset(rng.sample(names, rng.randrange(1, 6)))
        moving = [replace(p, node_name="") for p in cluster.pods if p.node_name in gone]
        shared = solve(cluster, moving, Options(), excluded_nodes=gone, reuse=reuse)
        removed = replace(
            cluster,
            nodes=tuple(n for n in cluster.nodes if n.name not in gone),
            pods=tuple(p for p in cluster.pods if p.node_name not in gone),
        )
        plain = solve(removed, moving, Options())
        assert _placements(shared) == _placements(plain)


@pytest.mark.parametrize("replacements", (1, 10))
@pytest.mark.parametrize("variant", ("plain", "spot", "daemonset"))
@pytest.mark.parametrize("seed", range(3))
def test_prefilter_only_skips_what_ifs_that_say_no(
    variant: str, seed: int, replacements: int
) -> None:
    cluster = _cluster(seed, variant, nodes=30, fill=12)
    options = replace(_options(variant), max_replacements=replacements)
    ps = new_pass(cluster, options, NOW)
    ranked = consolidation_candidates(ps)
    groups = [[c] for c in ranked] + [ranked[:k] for k in range(2, len(ranked) + 1)]
    pruned = 0
    for group in groups:
        if cannot_consolidate(ps, group):
            pruned += 1
            assert isinstance(consolidate(ps, group, METHOD_MULTI), NoOp), [c.name for c in group]
    # with one replacement (upstream) most hopeless what-ifs are skipped; with splits on this
    # doubling-size catalog few are, since two smaller nodes often cost less than one
    assert pruned > 0 or replacements > 1


def _crowded_spot(seed: int) -> Cluster:
    """Full nodes, and one oversized spot node whose pod fits nowhere else but on a cheaper type."""
    rng = random.Random(seed)
    types = {it.name: it for it in b.catalog()}
    nodes = [b.managed_node("n-big", types["m-16x"], zone=ZONES[seed % 3], capacity_type="spot")]
    pods = [b.bound("n-big", cpu="7", memory="2Gi")]
    for i in range(6):
        name = f"n-{i:03d}"
        ctype = rng.choice(("spot", "on-demand"))
        nodes.append(b.managed_node(name, types["m-8x"], zone=ZONES[i % 3], capacity_type=ctype))
        pods.append(b.bound(name, cpu="7500m", memory="2Gi"))
    return b.cluster([b.nodepool()], nodes=tuple(nodes), pods=tuple(pods))


@pytest.mark.parametrize("seed", range(4))
def test_spot_prefilter_only_skips_what_ifs_that_say_no(seed: int) -> None:
    """Without SpotToSpot, spot candidates needing a replacement are skipped only on a no."""
    crowded, mixed = _crowded_spot(seed), _cluster(seed, "spot", nodes=30, fill=20)
    for cluster, must_fire in ((crowded, True), (mixed, False)):
        ps = new_pass(cluster, Options(spot_to_spot_consolidation=False), NOW)
        ranked = consolidation_candidates(ps)
        groups = [[c] for c in ranked] + [ranked[:k] for k in range(2, len(ranked) + 1)]
        pruned = 0
        for group in groups:
            if cannot_consolidate(ps, group) == SPOT_TO_SPOT_DISABLED:
                pruned += 1
                verdict = consolidate(ps, group, METHOD_MULTI)
                assert isinstance(verdict, NoOp), [c.name for c in group]
        assert pruned > 0 or not must_fire  # guard: the rule does fire where it should


def test_free_index_yields_exactly_the_plain_scan() -> None:
    rng = random.Random(11)
    rooms = [
        {
            res.CPU: rng.randrange(-500, 4000),
            res.MEMORY: rng.randrange(0, 8),
            res.PODS: rng.randrange(0, 3),
        }
        for _ in range(300)
    ]
    index = FreeIndex(rooms)
    excluded = set(rng.sample(range(300), 40))
    pruned = index.without(excluded)
    for _ in range(200):
        request = {res.CPU: rng.randrange(0, 3000), res.MEMORY: rng.randrange(0, 6), res.PODS: 1}
        start = rng.randrange(0, 300)
        plain = [i for i in range(start, 300) if res.fits(request, rooms[i])]
        assert list(index.candidates(start, request)) == plain
        assert list(pruned.candidates(start, request)) == [i for i in plain if i not in excluded]
        # A pass copies a node, then places a pod there: the index follows the copy.
        chosen = next(iter(pruned.candidates(0, request)), None)
        if chosen is not None:
            copy = dict(rooms[chosen])
            pruned.replace(chosen, copy)
            for name, value in request.items():
                copy[name] = copy.get(name, 0) - value
            pruned.update(chosen)
            rooms_now = [copy if i == chosen else r for i, r in enumerate(rooms)]
            expect = [
                i for i in range(300) if i not in excluded and res.fits(request, rooms_now[i])
            ]
            assert list(pruned.candidates(0, request)) == expect
            rooms = rooms_now
            index = FreeIndex(rooms)


def test_free_index_front_prunes_blocks_whose_maxima_come_from_different_nodes() -> None:
    """Nodes alternately rich in CPU and in memory: every block's per-resource maxima pass a
    pod needing both, yet no node holds it, and the scans still equal the plain scan as nodes
    change (the block fronts follow every update, exclusion and join)."""
    rng = random.Random(13)
    rooms = [
        {res.CPU: 4000, res.MEMORY: 1, res.PODS: 5}
        if i % 2
        else {res.CPU: 100, res.MEMORY: 8, res.PODS: 5}
        for i in range(200)
    ]
    index = FreeIndex(rooms)
    both = {res.CPU: 2000, res.MEMORY: 4, res.PODS: 1}
    assert list(index.candidates(0, both)) == []
    for _ in range(300):
        i = rng.randrange(0, len(rooms))
        if rng.random() < 0.1:
            rooms.insert(i, {res.CPU: rng.choice((100, 3000)), res.MEMORY: rng.choice((1, 6))})
            index.insert(i, rooms[i])
        else:
            rooms[i][res.CPU] = rng.choice((100, 2500, 4000))
            rooms[i][res.MEMORY] = rng.choice((0, 1, 5, 8))
            index.update(i)
        start = rng.randrange(0, len(rooms))
        request = rng.choice((both, {res.CPU: 2000, res.MEMORY: 1}, {res.MEMORY: 5}))
        plain = [j for j in range(start, len(rooms)) if res.fits(request, rooms[j])]
        assert list(index.candidates(start, request)) == plain


def test_free_index_remembers_empty_scans_only_while_no_room_grows() -> None:
    """Scans repeated while nodes lose room, gain room, join and leave yield exactly the plain
    scan each time (a remembered "no node" never outlives a change that could make room)."""
    rng = random.Random(12)
    rooms = [
        {res.CPU: rng.randrange(0, 3000), res.MEMORY: rng.randrange(0, 6), res.PODS: 1}
        for _ in range(150)
    ]
    index = FreeIndex(rooms)
    alive = [True] * len(rooms)
    requests = [{res.CPU: c, res.MEMORY: m, res.PODS: 1} for c in (500, 1500, 2900) for m in (1, 5)]
    for _ in range(600):
        request = rng.choice(requests)
        start = rng.randrange(0, len(rooms))
        plain = [i for i in range(start, len(rooms)) if alive[i] and res.fits(request, rooms[i])]
        assert list(index.candidates(start, request)) == plain
        i = rng.randrange(0, len(rooms))
        op = rng.random()
        if op < 0.6 and alive[i]:
            rooms[i][res.CPU] += rng.choice((-400, 400))  # a pod placed, or one gone
            index.update(i)
        elif op < 0.7:
            rooms.insert(i, {res.CPU: rng.randrange(0, 3000), res.MEMORY: 5, res.PODS: 1})
            alive.insert(i, True)
            index.insert(i, rooms[i])
        elif op < 0.75:
            alive[i] = False
            index.kill(i)


def test_free_index_forgets_an_empty_scan_when_room_grows_or_a_node_joins() -> None:
    """A request no node had room for is found again once a node gains room or joins."""
    rooms = [{res.CPU: 1000, res.MEMORY: 4, res.PODS: 1} for _ in range(100)]
    index = FreeIndex(rooms)
    request = {res.CPU: 2000, res.MEMORY: 1, res.PODS: 1}
    assert list(index.candidates(0, request)) == []
    assert list(index.candidates(10, request)) == []  # remembered: ends at once
    rooms[70][res.CPU] = 2500  # a pod left node 70
    index.update(70)
    assert list(index.candidates(10, request)) == [70]
    rooms[70][res.CPU] = 500  # a pod placed there
    index.update(70)
    assert list(index.candidates(0, request)) == []
    index.insert(40, {res.CPU: 4000, res.MEMORY: 4, res.PODS: 1})
    assert list(index.candidates(0, request)) == [40]
    index.kill(40)
    assert list(index.candidates(0, request)) == []
