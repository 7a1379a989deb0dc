"""Split consolidation: one node replaced by several cheaper ones, within the same rules."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.disruption import split
from karpenter.core.disruption.consolidation import worst_launch_price
from karpenter.core.disruption.context import new_pass
from karpenter.core.disruption.planner import plan
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node
from karpenter.core.model.nodepool import Budget
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning import lp
from karpenter.core.provisioning.scheduler import solve
from karpenter.settings import Settings
from tests.support import builders as b

NOW = 1_700_000_000.0


def _families() -> tuple[InstanceType, ...]:
    out = []
    for family, gib, per_cpu in (("c", 2, 0.042), ("m", 4, 0.048), ("r", 8, 0.063)):
        for cpu in (2, 4, 8, 16):
            out.append(
                b.instance_type(
                    f"{family}-{cpu}x",
                    cpu,
                    gib * cpu,
                    price=round(per_cpu * cpu, 4),
                    labels={"family": family},
                )
            )
    return tuple(out)


def _mixed_node() -> tuple[Node, tuple[Pod, ...]]:
    """An r-16x whose pods are half CPU-heavy, half memory-heavy."""
    r16 = next(t for t in _families() if t.name == "r-16x")
    node = b.managed_node("big", r16, zone="zone-a", creation=NOW - 3600)
    pods = tuple(b.bound("big", cpu="2", memory="1Gi") for _ in range(6)) + tuple(
        b.bound("big", cpu="500m", memory="10Gi") for _ in range(6)
    )
    return node, pods


@pytest.mark.parametrize("seed", range(5))
def test_fluid_floor_is_the_lp_over_every_type(seed: int) -> None:
    """The floor from the dual's vertices equals HiGHS' LP over cpu and memory covers."""
    rng = random.Random(seed)
    types = [
        b.instance_type(
            f"t{i}", rng.randint(1, 32), rng.randint(1, 128), price=rng.uniform(0.05, 3)
        )
        for i in range(rng.randint(3, 25))
    ]
    cluster = b.cluster([b.nodepool()], types)
    ps = new_pass(cluster, Options(), NOW)
    for _ in range(5):
        need = {res.CPU: rng.randint(1, 60) * 1000, res.MEMORY: rng.randint(1, 200) * 2**30 * 1000}
        # rows in cores and GiB: HiGHS needs coefficients of sane magnitude
        scale = {res.CPU: 1000.0, res.MEMORY: 2.0**30 * 1000}
        model = lp.Model([need[n] / scale[n] for n in scale], [lp.INF, lp.INF])
        for it in types:
            alloc = it.allocatable
            model.add_column(
                min(o.price for o in it.offerings),
                [(r, alloc[n] / scale[n]) for r, n in enumerate(scale)],
            )
        exact = lp.solve(model).objective
        assert split.fluid_floor(ps, need) == pytest.approx(exact, rel=1e-6)


def test_mixed_node_splits_into_two_cheaper_families() -> None:
    """A memory-optimized node holding CPU-heavy and memory-heavy pods is replaced by a
    general-purpose and a small memory-optimized node whose worst-case prices sum lower."""
    node, pods = _mixed_node()
    cluster = b.cluster([b.nodepool()], _families(), nodes=(node,), pods=pods)
    result = plan(cluster, Options(), NOW)
    assert len(result.steps) == 1
    command = result.steps[0].command
    assert command.names == ("big",) and len(command.replacements) == 2
    assert {to for _, to in command.moves} == {"replacement:0", "replacement:1"}
    worst = sum(
        max(worst_launch_price(it, r.requirements) or 0.0 for it in r.instance_types)
        for r in command.replacements
    )
    assert worst < command.price_removed
    assert result.price_after < result.price_before


def test_one_replacement_setting_keeps_the_node() -> None:
    """With CONSOLIDATION_MAX_REPLACEMENTS=1 the same node stays: no single type is cheaper."""
    node, pods = _mixed_node()
    cluster = b.cluster([b.nodepool()], _families(), nodes=(node,), pods=pods)
    result = plan(cluster, Options(max_replacements=1), NOW)
    assert result.steps == ()


def test_firstfit_policy_never_splits() -> None:
    """COST_POLICY=firstfit settings map to one replacement, so the node stays."""
    options = Settings(COST_POLICY="firstfit").core_options()
    assert options.max_replacements == 1 and options.cost_policy == "firstfit"
    node, pods = _mixed_node()
    cluster = b.cluster([b.nodepool()], _families(), nodes=(node,), pods=pods)
    assert plan(cluster, options, NOW).steps == ()


def test_split_never_exceeds_the_replacement_cap() -> None:
    """A split needing more replacements than allowed is refused."""
    dear = b.instance_type("x-16x", 16, 64, price=5.0)
    spread = b.affinity_term(lbl.HOSTNAME, app="solo")
    pods = tuple(
        b.bound("huge", cpu="3", labels={"app": "solo"}, required_anti_affinity=(spread,))
        for _ in range(3)
    )
    node = b.managed_node("huge", dear, zone="zone-a", creation=NOW - 3600)
    cluster = b.cluster([b.nodepool()], (*b.catalog(), dear), nodes=(node,), pods=pods)
    assert plan(cluster, Options(max_replacements=2), NOW).steps == ()
    steps = plan(cluster, Options(max_replacements=3), NOW).steps
    assert len(steps) == 1 and len(steps[0].command.replacements) == 3


def test_do_not_disrupt_blocks_a_split() -> None:
    """A pod with karpenter.sh/do-not-disrupt keeps its node, split or not."""
    node, pods = _mixed_node()
    held = replace(pods[0], annotations={lbl.DO_NOT_DISRUPT: "true"})
    cluster = b.cluster([b.nodepool()], _families(), nodes=(node,), pods=(held, *pods[1:]))
    assert plan(cluster, Options(), NOW).steps == ()


def _fragmented_fleet(budget: str) -> tuple[Cluster, float]:
    """Eight half-step-wasting nodes of a linearly priced catalogue, and one pass's price for
    their pods (what the 200-pod kwok run scaled to 60 leaves behind)."""
    types = fake_instance_types(8)
    it3 = next(t for t in types if t.name == "fake-it-3")
    pool = b.nodepool("p")
    pool = replace(pool, disruption=replace(pool.disruption, budgets=(Budget(budget),)))
    nodes, pods = [], []
    for i, count in enumerate((8, 8, 8, 8, 7, 7, 7, 7)):
        nodes.append(b.managed_node(f"n{i}", it3, zone="test-zone-1", pool="p", creation=NOW))
        pods += [b.bound(f"n{i}", cpu="450m", memory="64Mi") for _ in range(count)]
    cluster = b.cluster([pool], types, nodes=tuple(nodes), pods=tuple(pods))
    fresh = [replace(p, node_name="", phase="Pending") for p in pods]
    one_pass = solve(b.cluster([pool], types), fresh, Options()).price
    return cluster, one_pass


def test_a_fragmented_fleet_is_repacked_to_one_pass_price_when_the_budget_allows() -> None:
    """With every node disruptible, split consolidation takes the fleet to what one
    provisioning pass buys for its pods; under the default 10% budget each command takes one
    node, and the fleet stops above that price (single-node steps cannot undo fragmentation)."""
    cluster, one_pass = _fragmented_fleet("100%")
    result = plan(cluster, Options(), NOW + 60)
    assert result.price_before == pytest.approx(8 * 1.2589934592)
    assert result.price_after == pytest.approx(one_pass)
    capped, _ = _fragmented_fleet("10%")
    stopped = plan(capped, Options(), NOW + 60)
    assert all(len(s.command.candidates) == 1 for s in stopped.steps)
    assert stopped.price_after > one_pass * 1.05
