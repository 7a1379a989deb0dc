"""The cost pass's replay counts topology exactly as the first pass did, so valid repacks stand.

A pod that lands on a claim before a later pod narrows the claim to one zone is counted in no
zone by the first pass (the claim's zone was still open). The replay must count it the same
way even though the claim it replays onto already carries the class's zone; otherwise a zone
spread that selects such pods sees skew the first pass never had and refuses every repack.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from karpenter.core.model.cluster import Options
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning import costpass, replay
from karpenter.core.provisioning.build import build_context
from karpenter.core.provisioning.scheduler import Kept, Scheduler, repack_kept, solve, solve_kept
from karpenter.core.provisioning.targets import Claim
from karpenter.core.provisioning.topology import Topology
from tests.core.test_costpass import ZONE, _verify_claim, _workload, families
from tests.support import builders as b

if TYPE_CHECKING:
    import pytest


def _pods() -> list[Pod]:
    """Twelve unconstrained pods labelled app=web (queued first: more CPU) that first fit puts
    on one r-16x, then three zone-spread pods whose selector matches all fifteen."""
    spread = (b.spread(ZONE, 1, selector=b.selector(app="web")),)
    web = {"app": "web"}
    pods = [b.pod(f"cpu-{i}", cpu="2", memory="1Gi", labels=web) for i in range(6)]
    pods += [b.pod(f"mem-{i}", cpu="500m", memory="10Gi", labels=web) for i in range(6)]
    pods += [
        b.pod(f"spread-{i}", cpu="250m", memory="256Mi", labels=web, topology_spread=spread)
        for i in range(3)
    ]
    return pods


def _counts(topology: Topology) -> list[dict[str, int]]:
    return [dict(g.counts) for g in (*topology.groups.values(), *topology.inverse.values())]


def test_replaying_the_first_pass_plan_leaves_its_topology_counts() -> None:
    """Replaying every pod onto a copy of the claim the first pass put it on succeeds and ends
    with every topology group's counts equal to the first pass's."""
    pods = _pods()
    cluster = b.cluster([b.nodepool()], families(), pods=tuple(pods))
    ctx = build_context(cluster, pods, Options(), frozenset())
    start = costpass.remember(ctx)
    scheduler = Scheduler(ctx)
    scheduler.placements = []
    scheduler.run(pods)
    first = _counts(ctx.topology)
    assert any(sum(c.values()) for c in first)  # the spread group counted its pods somewhere
    plans: dict[int, costpass.Planned] = {}
    targets: dict[int, costpass.Planned] = {}
    for index, placement in enumerate(scheduler.placements):
        claim = placement.target
        assert isinstance(claim, Claim)
        t = claim.template
        if id(claim) not in plans:
            mask = t.base_mask & t.catalog.compatible(claim.requirements)
            plans[id(claim)] = costpass.Planned(t, claim.hostname, claim.requirements, mask, 0)
        targets[index] = plans[id(claim)]
    assert replay.replay(ctx, scheduler.placements, start, targets) == set()
    assert _counts(ctx.topology) == first


def test_repack_under_a_zone_spread_selecting_earlier_pods_is_kept() -> None:
    """The zone-a claim holding the unconstrained pods is repacked into a cheaper mix, every
    pod stays in the zone first fit gave it, and every claim holds its pods."""
    pods = _pods()
    cluster = b.cluster([b.nodepool()], families(), pods=tuple(pods))
    first = solve(cluster, pods, Options(cost_policy="firstfit"))
    best = solve(cluster, pods, Options())
    assert sorted(c.launch.instance_type for c in first.new_claims) == ["c-2x", "c-2x", "r-16x"]
    assert best.price < first.price
    zones = [{p.key: c.launch.zone for c in r.new_claims for p in c.pods} for r in (first, best)]
    assert zones[0] == zones[1]
    assert len(zones[1]) == len(pods)
    for claim in best.new_claims:
        _verify_claim(claim, cluster)


def _state(kept: Kept) -> tuple[object, ...]:
    topology = kept.ctx.topology
    groups = (*topology.groups.values(), *topology.inverse.values())
    return tuple((dict(g.counts), g.total) for g in groups), kept.ctx.limits.save()


def test_a_repack_that_keeps_the_first_pass_leaves_its_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the cost pass keeps every claim of the first pass, whether it planned nothing
    (and skips the closing replay) or its plans failed (and replays the first pass), topology
    counts and NodePool usage are what replaying the first pass leaves; passes of both kinds
    occur on the random workloads."""
    calls = [0]
    real = replay.replay

    def counted(*args: Any) -> set[int]:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(replay, "replay", counted)
    kinds: Counter[str] = Counter()
    for seed in range(60):
        cluster, pods = _workload(seed)
        _, kept = solve_kept(cluster, pods, Options())
        calls[0] = 0
        results = repack_kept(kept)
        if [c.hostname for c in results.new_claims] != [c.hostname for c in kept.scheduler.claims]:
            kinds["repacked"] += 1
            continue
        kinds["replayed" if calls[0] else "skipped"] += 1
        after = _state(kept)
        assert kept.start is not None and kept.scheduler.placements is not None
        real(kept.ctx, kept.scheduler.placements, kept.start, {})
        assert _state(kept) == after, seed
    assert kinds["skipped"] >= 5 and kinds["repacked"] >= 5, kinds
