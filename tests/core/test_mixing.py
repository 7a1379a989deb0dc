"""The mixing hedge: launch types that hold the mix of pods the kube-scheduler will bind there."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.mixing import Hedge, Mixer
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.scheduling.requirements import Requirement, Requirements
from tests.support import builders as b

# GiB per CPU of the kwok catalogue's families, priced as it prices them (linear in size)
FAMILIES = {"c": 2, "s": 4, "m": 8}
TYPES = tuple(
    b.instance_type(
        f"{family}-{n}x",
        n,
        n * gib,
        price=0.025 * n + 0.001074 * n * gib,
        labels={"family": family},
    )
    for family, gib in FAMILIES.items()
    for n in (1, 2, 4, 8, 16)
)
BY_NAME = {it.name: it for it in TYPES}


def _small(i: int, **kw: Any) -> Pod:
    return b.pod(f"small-{i}", cpu="900m", memory="3100Mi", **kw)


def _large(i: int, **kw: Any) -> Pod:
    return b.pod(f"large-{i}", cpu="3500m", memory="28Gi", **kw)


def _solve(pods: list[Pod], *, hedge: bool) -> Results:
    cluster = b.cluster(types=TYPES, pods=tuple(pods))
    return solve(cluster, pods, Options(), hedge=hedge)


def _gib_per_cpu(it: InstanceType) -> float:
    alloc = it.allocatable
    return alloc[res.MEMORY] / 1000 / 2**30 / (alloc[res.CPU] / 1000)


def test_claims_planned_for_small_pods_launch_a_type_the_large_ones_cannot_strand() -> None:
    # upstream's basic scenario, scaled down: the pass's mix asks 7 GiB per CPU
    pods = [_small(i) for i in range(50)] + [_large(i) for i in range(50)]
    plain = _solve(pods, hedge=False)
    hedged = _solve(pods, hedge=True)
    # the cheapest plan puts the small pods' leftovers on s-family types (4 GiB per CPU):
    # two large pods (56 GiB) would take an s-16x's memory and strand half its CPUs
    assert any(_gib_per_cpu(BY_NAME[c.launch.instance_type]) < 7 for c in plain.new_claims)
    assert all(_gib_per_cpu(BY_NAME[c.launch.instance_type]) >= 7 for c in hedged.new_claims)
    # the same claims, with the same pods: only the types differ
    assert len(hedged.new_claims) == len(plain.new_claims)
    assert [c.pods for c in hedged.new_claims] == [c.pods for c in plain.new_claims]
    changed = [(p, h) for p, h in zip(plain.new_claims, hedged.new_claims, strict=True) if p != h]
    assert changed
    for before, after in changed:
        assert after.hedged_from == before.launch.instance_type
        assert after.launch.price <= before.launch.price * 1.25
        # the narrowed types still hold the planned pods, the launched one first
        assert after.instance_types[0].name == after.launch.instance_type
        assert all(res.fits(after.requests, it.allocatable) for it in after.instance_types)
        assert {it.name for it in after.instance_types} <= {it.name for it in before.instance_types}
    assert hedged.price > plain.price
    # a claim left alone says so
    hedged_now = [a for _, a in changed]
    assert all(not c.hedged_from for c in hedged.new_claims if c not in hedged_now)


def test_a_claim_that_holds_most_of_its_mix_keeps_the_cheapest_type() -> None:
    # 17 small pods planned on an s-16x, 8 large ones elsewhere in the pass
    mixer = Mixer([_small(i) for i in range(17)] + [_large(i) for i in range(8)])
    s16, m16 = BY_NAME["s-16x"], BY_NAME["m-16x"]
    options = [(0, s16.offerings[0]), (1, m16.offerings[0])]

    def hedge(own: int) -> Hedge | None:
        return mixer.hedge(options, [s16, m16], {}, lambda _: True, 0, own, {})

    # its own pods are most of what could land there: nothing else mixes in enough to matter
    assert hedge(own=17) is None
    # a third of the mix: the large pods will take its memory, so it launches as an m-16x
    found = hedge(own=8)
    assert found is not None
    assert [o for o, _ in found.options] == [1]
    assert found.planned == "s-16x"


def test_pods_that_cannot_land_on_a_node_are_not_in_its_mix() -> None:
    # the small pods may only run in zone-a, the large ones only in zone-b: the kube-scheduler
    # cannot put a large pod on a small pod's node, so those keep their cheapest type
    zone = "topology.kubernetes.io/zone"
    pods = [_small(i, node_selector={zone: "zone-a"}) for i in range(50)]
    pods += [_large(i, node_selector={zone: "zone-b"}) for i in range(50)]
    plain = _solve(pods, hedge=False)
    hedged = _solve(pods, hedge=True)
    assert hedged.new_claims == plain.new_claims
    small = Counter(c.launch.instance_type for c in hedged.new_claims if c.labels[zone] == "zone-a")
    assert small and all(not name.startswith("m-") for name in small)


def test_uniform_pods_are_their_own_mix() -> None:
    pods = [_small(i) for i in range(60)]
    assert _solve(pods, hedge=True).new_claims == _solve(pods, hedge=False).new_claims


def test_the_hedge_is_deterministic() -> None:
    pods = [_small(i) for i in range(40)] + [_large(i) for i in range(30)]
    assert _solve(pods, hedge=True) == _solve(list(pods), hedge=True)


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("In", ["a"], {"k": "a"}, True),
        ("In", ["a"], {"k": "b"}, False),
        ("In", ["a"], {}, False),
        ("NotIn", ["a"], {}, True),
        ("NotIn", ["a"], {"k": "a"}, False),
        ("Exists", [], {}, False),
        ("Exists", [], {"k": "x"}, True),
        ("DoesNotExist", [], {}, True),
        ("DoesNotExist", [], {"k": "x"}, False),
        ("Gt", ["3"], {"k": "4"}, True),
        ("Gt", ["3"], {"k": "3"}, False),
        ("Gt", ["3"], {}, False),
    ],
)
def test_node_selector_semantics(
    operator: str, values: list[str], labels: dict[str, str], expected: bool
) -> None:
    """Whether a pod can land on a node, as the mix decides it (a missing label satisfies only
    NotIn and DoesNotExist): the strict compatibility ``try_existing`` uses for fixed labels."""
    reqs = Requirements((Requirement.new("k", operator, values),))
    assert Requirements.from_labels(labels).compatible(reqs, frozenset()) is expected
