"""Runs of alike pods placed together give exactly the placements of one pod at a time.

After a pod is placed, the pods alike that follow it in the queue (same namespace, requests,
node selection and tolerations, no spread, pod (anti-)affinity, host port or volume, none
selected by another pod's anti-affinity) are asked of its target only (``Scheduler._follow``).
Random workloads mixing such runs with the pods that must not join them (different labels
some anti-affinity selects, preferences that relax, spreads, taints, limits, existing nodes
with some room) are solved with and without the shortcut, first fit and with the cost pass,
and disruption plans are made both ways; every placement, claim and reason must agree.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from karpenter.core.disruption.planner import plan
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.pod import Pod, WeightedNodeTerm
from karpenter.core.provisioning import scheduler
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.scheduling.taints import Taint, Toleration
from tests.core.test_disruption_incremental import NOW
from tests.core.test_split_bound import _bench_like
from tests.support import builders as b

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
TAINT = Taint("dedicated", "NoSchedule", "batch")


def _run_kw(rng: random.Random, d: int) -> dict[str, Any]:
    """What a run's pods share beyond their shape: mostly nothing, sometimes a rule."""
    rule = rng.choice(("none", "none", "none", "zone", "prefer", "tolerate", "anti", "spread"))
    if rule == "zone":
        return {"node_selector": {ZONE: rng.choice(b.ZONES)}}
    if rule == "prefer":
        # a preference nothing satisfies: every pod of the run relaxes it
        return {"preferred_node_terms": (WeightedNodeTerm(5, b.term((ZONE, "In", ["nowhere"]))),)}
    if rule == "tolerate":
        return {"tolerations": (Toleration("dedicated", "Equal", "batch"),)}
    if rule == "anti":
        return {"required_anti_affinity": (b.affinity_term(HOST, tier=f"t{d % 2}"),)}
    if rule == "spread":
        return {"topology_spread": (b.spread(ZONE, 1, selector=b.selector(app=f"app{d}")),)}
    return {}


def _pods(rng: random.Random) -> list[Pod]:
    pods: list[Pod] = []
    for d in range(rng.randint(2, 7)):
        cpu = rng.choice(("250m", "500m", "1", "1500m"))
        memory = rng.choice(("512Mi", "1Gi", "2Gi", "3Gi"))
        kw = _run_kw(rng, d)
        for i in range(rng.randint(1, 30)):
            labels = {"app": f"app{d}"}
            if rng.random() < 0.3:
                labels["tier"] = f"t{i % 2}"  # selected by some runs' anti-affinity
            pods.append(b.pod(f"r{d}-{i}", cpu=cpu, memory=memory, labels=labels, **_odd(rng, kw)))
    return pods


def _odd(rng: random.Random, kw: dict[str, Any]) -> dict[str, Any]:
    """The run's rule, or now and then a pod of the run that differs in one of them."""
    roll = rng.random()
    if roll < 0.1:
        return {**kw, "tolerations": (Toleration("dedicated", "Equal", "batch"),)}
    zone = rng.choice(b.ZONES)
    if roll < 0.2:  # a preference a claim still open in zone can take
        return {**kw, "preferred_node_terms": (WeightedNodeTerm(5, b.term((ZONE, "In", [zone]))),)}
    if roll < 0.3:
        return {**kw, "required_node_terms": (b.term((ZONE, "In", [zone])),)}
    return kw


def _cluster(seed: int) -> tuple[Cluster, list[Pod]]:
    """Pools (one tainted, maybe limits), existing nodes with some room, and runs of pods."""
    rng = random.Random(seed)
    pools = [b.nodepool("general")]
    if rng.random() < 0.5:
        pools.append(b.nodepool("batch", taints=(TAINT,), weight=10))
    if rng.random() < 0.3:
        pools[0] = b.nodepool("general", limits=res.parse({"cpu": rng.choice((8, 16, 40))}))
    types = b.catalog()
    nodes, bound = [], []
    for n in range(rng.randint(0, 6)):
        it = rng.choice(types[1:])
        name = f"n{n}"
        nodes.append(b.managed_node(name, it, zone=rng.choice(b.ZONES), pool="general"))
        for k in range(rng.randint(0, 3)):
            bound.append(b.bound(name, f"{name}-{k}", cpu="500m", memory="1Gi"))
    pods = _pods(rng)
    cluster = b.cluster(pools, types, nodes=tuple(nodes), pods=(*bound, *pods))
    return cluster, pods


def _placements(results: Results) -> tuple[object, ...]:
    claims = tuple(
        (c.launch, tuple(it.name for it in c.instance_types), tuple(p.key for p in c.pods))
        for c in results.new_claims
    )
    existing = tuple((name, tuple(p.key for p in pods)) for name, pods in results.existing)
    return claims, existing, tuple(sorted(results.unschedulable.items()))


def _one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    def alone(self: scheduler.Scheduler, leader: PodWork, queue: Sequence[PodWork]) -> None:
        return None

    monkeypatch.setattr(scheduler.Scheduler, "_follow", alone)


def _counting(monkeypatch: pytest.MonkeyPatch, followed: list[int]) -> None:
    real = scheduler.Scheduler._again

    def again(self: scheduler.Scheduler, *args: Any) -> bool:
        placed = real(self, *args)
        followed[0] += placed
        return placed

    monkeypatch.setattr(scheduler.Scheduler, "_again", again)


@pytest.mark.parametrize("policy", ["firstfit", "optimal"])
def test_runs_placed_together_are_placed_as_one_at_a_time(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On random workloads every claim (types, launch, pods), every existing node's pods and
    every unschedulable reason are the same with runs followed as pod by pod, and runs are
    followed there."""
    followed = [0]
    for seed in range(60):
        cluster, pods = _cluster(seed)
        options = Options(cost_policy=policy)
        with monkeypatch.context() as m:
            _counting(m, followed)
            together = solve(cluster, pods, options)
        with monkeypatch.context() as m:
            _one_at_a_time(m)
            alone = solve(cluster, pods, options)
        assert _placements(together) == _placements(alone), seed
    assert followed[0] > 500


def test_disruption_plans_are_the_same_with_runs_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Disruption plans of benchmark-like clusters (every what-if a first fit) are the same
    commands, replacements and moves with runs followed as pod by pod."""

    def steps(cluster: Cluster) -> list[tuple[object, ...]]:
        result = plan(cluster, Options(), NOW)
        return [
            (
                s.command.method,
                s.command.names,
                tuple((r.launch, len(r.instance_types)) for r in s.command.replacements),
                s.command.moves,
            )
            for s in result.steps
        ]

    followed = [0]
    for seed in range(3):
        cluster = _bench_like(seed, nodes=80)
        with monkeypatch.context() as m:
            _counting(m, followed)
            together = steps(cluster)
        with monkeypatch.context() as m:
            _one_at_a_time(m)
            alone = steps(cluster)
        assert together == alone, seed
    assert followed[0] > 50
