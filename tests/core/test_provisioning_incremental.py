"""The provisioning pass's shortcuts change its speed, never its answers.

A pass counts its NodeClaims against NodePool limits as they change (instead of summing every
claim at each new-claim attempt), and finalizes claims alike in pool, zone, capacity type and
types from one shared computation. Each shortcut is checked here against the plain computation
on seeded random workloads (limits on cpu, memory and nodes that bind part-way, two pools,
spread, anti-affinity, spot):
- at every new-claim attempt the running limits give the mask the plain sum over claims gives;
- every finalized claim equals finalizing that claim alone, with nothing shared.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import Limits, build_context
from karpenter.core.provisioning.results import finalize, finalize_claim
from karpenter.core.provisioning.scheduler import Scheduler
from karpenter.core.provisioning.targets import Claim, Template
from tests.support import builders as b

SHAPES = (("250m", "256Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("1500m", "4Gi"), ("3", "6Gi"))
LIMITS = ({"cpu": "40"}, {"memory": "96Gi"}, {"nodes": "9"}, {"cpu": "60", "memory": "200Gi"})


def _pods(seed: int, count: int) -> list[Pod]:
    rng = random.Random(seed)
    pods = []
    for _ in range(count):
        cpu, mem = rng.choice(SHAPES)
        kw: dict[str, Any] = {}
        app = rng.choice(("web", "api", "db", "batch"))
        if app == "web":
            kw["topology_spread"] = (b.spread("topology.kubernetes.io/zone", 1),)
        if app == "db":
            kw["required_anti_affinity"] = (b.affinity_term("kubernetes.io/hostname", app="db"),)
        if app == "batch":
            kw["node_selector"] = {"karpenter.sh/capacity-type": "spot"}
        pods.append(b.pod(cpu=cpu, memory=mem, labels={"app": app}, **kw))
    return pods


def _cluster(seed: int) -> Cluster:
    limits = LIMITS[seed % len(LIMITS)]
    pools = [
        b.nodepool("first", weight=10, limits=res.parse(limits)),
        b.nodepool("second", limits=res.parse({"cpu": "30"})),
    ]
    return b.cluster(pools)


def _plain_mask(start: Limits, template: Template, claims: Sequence[Claim]) -> int:
    """What a new claim of ``template`` may use, summing every claim of the pass from scratch."""
    pool = template.nodepool.name
    limits = start.limits.get(pool)
    if not limits:
        return -1
    used = dict(start.used.get(pool, {}))
    nodes = start.nodes_used.get(pool, 0)
    names = [n for n in limits if n != res.NODES]
    for claim in claims:
        if claim.template is template:
            nodes += 1
            indices = template.catalog.indices(claim.mask)
            for name, value in template.capacity.max_capacity(indices, names).items():
                used[name] = used.get(name, 0) + value
    if res.NODES in limits and nodes + 1 > limits[res.NODES] // 1000:
        return 0
    return template.capacity.within({n: limits[n] - used.get(n, 0) for n in names})


class _Checked(Limits):
    """Limits that compare every answer with the plain sum over the scheduler's claims."""

    scheduler: Scheduler
    start: Limits
    asked: int

    def mask(self, template: Template) -> int:
        got = super().mask(template)
        assert got == _plain_mask(self.start, template, self.scheduler.claims)
        self.asked += 1
        return got


def _copy(limits: Limits) -> Limits:
    return Limits(
        limits.limits,
        {k: dict(v) for k, v in limits.used.items()},
        dict(limits.nodes_used),
    )


@pytest.mark.parametrize("seed", range(8))
def test_running_limits_equal_the_plain_sum_over_claims(seed: int) -> None:
    """Each new-claim attempt sees the limits mask the plain sum over every claim gives."""
    cluster = _cluster(seed)
    pending = _pods(seed, 160)
    ctx = build_context(cluster, pending, Options(), frozenset())
    checked = _Checked(*(getattr(ctx.limits, f) for f in ("limits", "used", "nodes_used")))
    checked.start = _copy(ctx.limits)
    checked.asked = 0
    ctx.limits = checked
    scheduler = Scheduler(ctx)
    checked.scheduler = scheduler
    reasons = scheduler.run(pending)
    assert checked.asked > len(scheduler.claims) // 2
    # guard: the limits did bind, so the running counts mattered
    assert any("limits" in r for r in reasons.values())


@pytest.mark.parametrize("seed", range(8))
def test_shared_finalizing_equals_finalizing_each_claim_alone(seed: int) -> None:
    """Claims finalized together equal each claim finalized with nothing shared."""
    cluster = b.cluster([b.nodepool("only")])
    pending = _pods(seed, 160)
    ctx = build_context(cluster, pending, Options(), frozenset())
    scheduler = Scheduler(ctx)
    reasons = scheduler.run(pending)
    shared = finalize(ctx, scheduler.claims, reasons)
    alone = [finalize_claim(ctx, claim) for claim in scheduler.claims]
    assert list(shared.new_claims) == alone
    # guard: some claims did share a computation
    assert len({id(c.instance_types) for c in shared.new_claims}) < len(shared.new_claims)
