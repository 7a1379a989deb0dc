"""The cost pass and the lower bound: cheaper fleets, every constraint kept, honest bounds.

Random workloads (seeded) are solved first fit and with the cost pass; every claim of both is
checked by an independent verifier written here from the rules (not from the solver's code),
and the lower bound is compared with every fleet and with brute force on tiny cases.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, DaemonSet, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.pod import DO_NOT_SCHEDULE, Pod
from karpenter.core.provisioning.results import NewNodeClaim, Results
from karpenter.core.provisioning.scheduler import lower_bound, solve, solve_pass
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms
from karpenter.core.scheduling.taints import Taint, Toleration, untolerated
from tests.support import builders as b

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
FAMILY = "family"
GPU_TAINT = Taint("dedicated", "NoSchedule", "batch")


def families() -> tuple[InstanceType, ...]:
    """c (2 GiB/CPU), m (4) and r (8) families at 2..16 CPU, priced like EC2 (r dearest/CPU)."""
    out = []
    for family, gib, per_cpu in (("c", 2, 0.042), ("m", 4, 0.048), ("r", 8, 0.063)):
        for cpu in (2, 4, 8, 16):
            out.append(
                b.instance_type(
                    f"{family}-{cpu}x",
                    cpu,
                    gib * cpu,
                    price=round(per_cpu * cpu, 4),
                    labels={FAMILY: family},
                    overhead={"cpu": "100m", "memory": "256Mi"},
                )
            )
    return tuple(out)


def _verify_claim(claim: NewNodeClaim, cluster: Cluster) -> None:
    """Everything a launched node must satisfy for the pods put on it."""
    launched = next(it for it in claim.instance_types if it.name == claim.launch.instance_type)
    labels = {**claim.labels, HOST: claim.hostname}
    daemons = [d for d in cluster.daemonsets if _daemon_runs(d, labels, claim.taints)]
    total = res.add(*(p.requests for p in claim.pods), *(d.template.requests for d in daemons))
    assert res.fits(total, launched.allocatable), (claim.hostname, total, launched.name)
    ports = [hp for p in claim.pods for hp in p.host_ports]
    ports += [hp for d in daemons for hp in d.template.host_ports]
    assert len(ports) == len(set(ports)), f"host ports clash on {claim.hostname}"
    for pod in claim.pods:
        assert not untolerated(claim.taints, pod.tolerations), pod.key
        assert _matches(pod, labels), (pod.key, labels)
        for term in pod.required_anti_affinity:
            assert term.topology_key == HOST
            others = [q for q in claim.pods if q is not pod and term.selector is not None]
            assert not any(term.selector.matches(q.labels) for q in others), pod.key  # type: ignore[union-attr]
        for tsc in pod.topology_spread:
            if tsc.topology_key == HOST and tsc.selector is not None:
                same = sum(tsc.selector.matches(q.labels) for q in claim.pods)
                assert same <= tsc.max_skew, (pod.key, same)
    assert launched.name in {it.name for it in claim.instance_types}
    assert any(
        o.available
        and o.zone == claim.launch.zone
        and o.capacity_type == claim.launch.capacity_type
        for o in launched.offerings
    )


def _daemon_runs(d: DaemonSet, labels: dict[str, str], taints: Sequence[Taint]) -> bool:
    if untolerated(taints, d.template.tolerations, include_prefer=False):
        return False
    return _matches(d.template, labels)


def _matches(pod: Pod, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if not pod.required_node_terms:
        return True
    return any(_term_matches(from_selector_terms(t), labels) for t in pod.required_node_terms)


def _term_matches(reqs: Requirements, labels: dict[str, str]) -> bool:
    for key in reqs:
        req = reqs[key]
        value = labels.get(key)
        if value is None:
            if not req.complement or req.values or req.gte is not None or req.lte is not None:
                return False
            continue
        if not req.has(value):
            return False
    return True


def _verify_spreads(results: Results, pods: Sequence[Pod]) -> None:
    """Zone spreads (DoNotSchedule) hold over the final fleet: max - min <= maxSkew."""
    zone_of = {p.key: c.launch.zone for c in results.new_claims for p in c.pods}
    for pod in pods:
        for tsc in pod.topology_spread:
            if tsc.topology_key != ZONE or tsc.when_unsatisfiable != DO_NOT_SCHEDULE:
                continue
            assert tsc.selector is not None
            counts = Counter(
                zone_of[q.key] for q in pods if q.key in zone_of and tsc.selector.matches(q.labels)
            )
            per_zone = [counts.get(z, 0) for z in b.ZONES]
            assert max(per_zone) - min(per_zone) <= tsc.max_skew, (pod.key, per_zone)


def _verify_limits(results: Results, cluster: Cluster) -> None:
    for pool in cluster.nodepools:
        limit = (pool.limits or {}).get(res.CPU)
        if limit is None:
            continue
        used = 0
        for claim in results.new_claims:
            if claim.nodepool == pool.name:
                used += max(it.capacity.get(res.CPU, 0) for it in claim.instance_types)
        assert used <= limit, (pool.name, used, limit)


def _rule(rule: str, app: str, d: int) -> dict[str, Any]:
    """Pod fields for one kind of constraint (``none``: no constraint)."""
    rules: dict[str, dict[str, Any]] = {
        "zone": {"topology_spread": (b.spread(ZONE, 1, selector=b.selector(app=app)),)},
        "anti": {"required_anti_affinity": (b.affinity_term(HOST, app=app),)},
        "hostspread": {"topology_spread": (b.spread(HOST, 1, selector=b.selector(app=app)),)},
        "port": {"host_ports": (b.HostPort(8000 + d),)},
        "r": {"node_selector": {FAMILY: "r"}},
        "batch": {"tolerations": (Toleration("dedicated", "Equal", "batch"),)},
    }
    return rules.get(rule, {})


def _workload(seed: int) -> tuple[Cluster, list[Pod]]:
    """Deployments of random shapes and constraints over c/m/r pools, maybe a DaemonSet."""
    rng = random.Random(seed)
    pools = [b.nodepool("general")]
    if rng.random() < 0.4:
        pools.append(b.nodepool("batch", taints=(GPU_TAINT,), weight=10))
    if rng.random() < 0.3:
        pools[0] = b.nodepool("general", limits=res.parse({"cpu": rng.choice((24, 48, 96))}))
    pods: list[Pod] = []
    rules = ("none", "none", "zone", "zone", "anti", "hostspread", "port", "r", "batch")
    for d in range(rng.randint(1, 5)):
        app = f"app{d}"
        kw = _rule(rng.choice(rules), app, d)
        cpu = rng.choice(("250m", "500m", "1", "2", "3"))
        memory = rng.choice(("512Mi", "1Gi", "2Gi", "4Gi", "8Gi", "12Gi"))
        for i in range(rng.randint(1, 9)):
            pods.append(b.pod(f"{app}-{i}", cpu=cpu, memory=memory, labels={"app": app}, **kw))
    daemonsets: tuple[DaemonSet, ...] = ()
    if rng.random() < 0.6:
        daemonsets = (b.daemonset("agent", cpu="200m", memory="256Mi"),)
    cluster = b.cluster(pools, families(), daemonsets=daemonsets, pods=tuple(pods))
    return cluster, pods


@pytest.mark.parametrize("seed", range(40))
def test_random_workloads_keep_every_constraint_and_never_cost_more(seed: int) -> None:
    """On random workloads the cost pass places the same pods, keeps every rule, costs no
    more than first fit, and the lower bound is at most both prices."""
    cluster, pods = _workload(seed)
    first = solve(cluster, pods, Options(cost_policy="firstfit"), bound=True)
    best = solve(cluster, pods, Options(), bound=True)
    assert set(best.unschedulable) == set(first.unschedulable)
    assert best.price <= first.price + 1e-9
    assert best.lower_bound is not None and first.lower_bound is not None
    assert best.lower_bound <= best.price + 1e-9
    assert first.lower_bound <= first.price + 1e-9
    for results in (first, best):
        placed = sorted(p.key for c in results.new_claims for p in c.pods)
        assert len(placed) == len(set(placed))
        for claim in results.new_claims:
            _verify_claim(claim, cluster)
        _verify_spreads(results, pods)
        _verify_limits(results, cluster)


def test_firstfit_policy_is_todays_behaviour() -> None:
    """COST_POLICY=firstfit gives exactly the first pass's claims (the repack is skipped)."""
    cluster, pods = _workload(3)
    first = solve(cluster, pods, Options(cost_policy="firstfit"))
    again = solve(cluster, pods, Options(), repack=False)
    assert [(c.launch, [p.key for p in c.pods]) for c in first.new_claims] == [
        (c.launch, [p.key for p in c.pods]) for c in again.new_claims
    ]


def test_one_dear_node_splits_into_a_cheaper_mix_of_families() -> None:
    """Pods that first fit puts on one memory-optimized node go to a general-purpose node and
    a small memory-optimized one, which together cost less."""
    cpu_heavy = [b.pod(f"cpu-{i}", cpu="2", memory="1Gi") for i in range(6)]
    mem_heavy = [b.pod(f"mem-{i}", cpu="500m", memory="10Gi") for i in range(6)]
    pods = cpu_heavy + mem_heavy
    cluster = b.cluster([b.nodepool()], families(), pods=tuple(pods))
    first = solve(cluster, pods, Options(cost_policy="firstfit"))
    best = solve(cluster, pods, Options(), bound=True)
    assert [c.launch.instance_type for c in first.new_claims] == ["r-16x"]
    assert sorted(c.launch.instance_type for c in best.new_claims) == ["m-16x", "r-2x"]
    assert best.price < first.price
    assert best.lower_bound is not None and best.lower_bound <= best.price


def test_many_kinds_of_pinned_claims_stay_as_they_are() -> None:
    """Beyond eight distinct pinned contents the pinned claims are kept whole, and the rest of
    the class is still repacked: every pod placed once, every rule kept, never dearer."""
    anti = b.affinity_term(HOST, app="solo")
    # ten host-exclusive pods of ten sizes, each nearly filling a 16-CPU node alone
    solo = [
        b.pod(
            f"solo-{i}",
            cpu=f"{14100 + 100 * i}m",
            memory="1Gi",
            labels={"app": "solo"},
            required_anti_affinity=(anti,),
        )
        for i in range(10)
    ]
    rest = [b.pod(f"cpu-{i}", cpu="2", memory="1Gi") for i in range(6)]
    rest += [b.pod(f"mem-{i}", cpu="2", memory="10Gi") for i in range(6)]
    pods = solo + rest
    cluster = b.cluster([b.nodepool()], families(), pods=tuple(pods))
    first = solve(cluster, pods, Options(cost_policy="firstfit"))
    best = solve(cluster, pods, Options(), bound=True)
    placed = sorted(p.key for c in best.new_claims for p in c.pods)
    assert placed == sorted(p.key for p in pods)
    assert best.price < first.price  # the two unpinned claims were repacked
    solo_nodes = {c.hostname for c in best.new_claims for p in c.pods if p.name.startswith("solo")}
    assert len(solo_nodes) == 10
    for claim in best.new_claims:
        _verify_claim(claim, cluster)


def test_cost_pass_is_deterministic() -> None:
    """The same snapshot gives the same fleet, claim for claim, on every run."""
    cluster, pods = _workload(7)
    runs = [solve(cluster, pods, Options(), bound=True) for _ in range(3)]
    shapes = [
        ([(c.launch, tuple(p.key for p in c.pods)) for c in r.new_claims], r.lower_bound)
        for r in runs
    ]
    assert shapes[0] == shapes[1] == shapes[2]


# ---- the lower bound against brute force ---------------------------------------------------
def _brute(pods: Sequence[Pod], types: Sequence[InstanceType], overhead: res.Resources) -> float:
    """The cheapest fleet for ``pods`` by enumerating every partition into nodes."""
    best = float("inf")

    def node_price(group: Sequence[Pod]) -> float:
        need = res.add(*(p.requests for p in group), overhead)
        fits = [
            min(o.price for o in it.offerings) for it in types if res.fits(need, it.allocatable)
        ]
        return min(fits, default=float("inf"))

    def partitions(items: list[Pod]) -> itertools.chain[list[list[Pod]]]:
        if not items:
            return itertools.chain([[]])
        first, rest = items[0], items[1:]
        out: list[list[list[Pod]]] = []
        for part in partitions(rest):
            for i in range(len(part)):
                out.append([*part[:i], [first, *part[i]], *part[i + 1 :]])
            out.append([[first], *part])
        return itertools.chain(out)

    for part in partitions(list(pods)):
        best = min(best, sum(node_price(g) for g in part))
    return best


TINY = [
    pytest.param([("1", "1Gi")], id="one-pod"),
    pytest.param([("1", "1Gi"), ("500m", "2Gi")], id="two-share-a-node"),
    pytest.param([("1500m", "1Gi")] * 3, id="three-that-need-two-nodes"),
    pytest.param([("3", "2Gi"), ("500m", "14Gi"), ("1", "3Gi")], id="mixed-families"),
    pytest.param([("1", "6Gi")] * 4 + [("2", "1Gi")] * 2, id="six-of-two-shapes"),
]


@pytest.mark.parametrize("shapes", TINY)
def test_lower_bound_is_at_most_the_brute_force_optimum(shapes: list[tuple[str, str]]) -> None:
    """On tiny workloads the bound never exceeds the true optimum, which the fleet matches."""
    types = families()[:2] + families()[4:6] + families()[8:10]  # 2 and 4 CPU of c, m, r
    pods = [b.pod(cpu=c, memory=m) for c, m in shapes]
    cluster = b.cluster([b.nodepool()], types, pods=tuple(pods))
    best = solve(cluster, pods, Options(), bound=True)
    optimum = _brute(pods, types, {})
    assert best.lower_bound is not None
    assert best.lower_bound <= optimum + 1e-9
    assert best.price == pytest.approx(optimum)


@pytest.mark.parametrize(
    "shapes",
    [
        pytest.param([("1", "1Gi")], id="one-pod"),
        pytest.param([("1", "1Gi"), ("500m", "2Gi")], id="two-share-a-node"),
        pytest.param([("3", "2Gi"), ("3", "2Gi")], id="two-that-fill-a-node"),
    ],
)
def test_lower_bound_equals_the_optimum_where_whole_nodes_decide(
    shapes: list[tuple[str, str]],
) -> None:
    """Where the cheapest cover of the pods' summed requests is one node, the bound is exact."""
    types = families()
    pods = [b.pod(cpu=c, memory=m) for c, m in shapes]
    cluster = b.cluster([b.nodepool()], types, pods=tuple(pods))
    best = solve(cluster, pods, Options(), bound=True)
    assert best.lower_bound == pytest.approx(_brute(pods, types, {}), rel=1e-5)


def test_lower_bound_knows_pods_do_not_split_between_nodes() -> None:
    """Three 2-CPU pods on 4-CPU nodes (3.9 allocatable) need three nodes, not the two their
    summed CPU would: the bound is the three nodes' price."""
    types = (families()[1],)  # c-4x alone
    pods = [b.pod(f"p{i}", cpu="2", memory="1Gi") for i in range(3)]
    cluster = b.cluster([b.nodepool()], types, pods=tuple(pods))
    best = solve(cluster, pods, Options(), bound=True)
    price = min(o.price for o in types[0].offerings)
    assert best.price == pytest.approx(3 * price)
    assert best.lower_bound == pytest.approx(3 * price, rel=1e-5)


def test_lower_bound_counts_daemon_overhead_per_node() -> None:
    """A DaemonSet on every node raises the bound: each node pays for the daemon."""
    pods = [b.pod(f"p{i}", cpu="1800m", memory="1Gi") for i in range(4)]
    plain = b.cluster([b.nodepool()], families(), pods=tuple(pods))
    heavy = b.cluster(
        [b.nodepool()],
        families(),
        pods=tuple(pods),
        daemonsets=(b.daemonset("agent", cpu="1", memory="1Gi"),),
    )
    without = solve(plain, pods, Options(), bound=True).lower_bound
    with_daemon = solve(heavy, pods, Options(), bound=True)
    assert without is not None and with_daemon.lower_bound is not None
    assert with_daemon.lower_bound > without
    assert with_daemon.lower_bound <= with_daemon.price


def test_zone_spread_forces_whole_nodes_in_every_zone() -> None:
    """Three zone-spread pods need a node in each zone; the bound knows (three whole nodes)."""
    app = b.selector(app="web")
    pods = [
        b.pod(
            f"w{i}",
            cpu="1",
            memory="1Gi",
            labels={"app": "web"},
            topology_spread=(b.spread(ZONE, 1, selector=app),),
        )
        for i in range(3)
    ]
    cluster = b.cluster([b.nodepool()], families(), pods=tuple(pods))
    best = solve(cluster, pods, Options(), bound=True)
    cheapest = min(o.price for it in families() for o in it.offerings)
    assert len({c.launch.zone for c in best.new_claims}) == 3
    assert best.lower_bound == pytest.approx(3 * cheapest, rel=1e-5)
    assert best.price == pytest.approx(3 * cheapest)


def test_zone_bound_knows_other_pods_cannot_use_the_zones_spare_room() -> None:
    """Three zone-spread pods fill a 4-CPU node in each zone, leaving 0.4 CPU spare in each;
    two 1-CPU pods free to go anywhere fit none of that spare room, so every valid fleet buys
    at least one more whole node: the bound counts it (not the free pods at fluid prices)."""
    app = b.selector(app="web")
    spread = [
        b.pod(
            f"w{i}",
            cpu="3500m",
            memory="1Gi",
            labels={"app": "web"},
            topology_spread=(b.spread(ZONE, 1, selector=app),),
        )
        for i in range(3)
    ]
    free = [b.pod(f"f{i}", cpu="1", memory="1Gi") for i in range(2)]
    pods = [*spread, *free]
    types = families()[:4]  # c-2x .. c-16x
    cluster = b.cluster([b.nodepool()], types, pods=tuple(pods))
    best = solve(cluster, pods, Options(), bound=True)
    c2, c4 = (min(o.price for o in t.offerings) for t in types[:2])
    assert best.lower_bound is not None
    assert best.lower_bound >= (3 * c4 + c2) * (1 - 1e-5)
    assert best.lower_bound <= best.price
    assert best.price == pytest.approx(4 * c4)  # the optimum: the free pods share a c-4x


def test_the_bound_apart_from_the_pass_is_the_passs_own() -> None:
    """``lower_bound`` in the context of the pass that chose the claims equals the bound
    ``solve(bound=True)`` computes (the controller computes it after writing its claims)."""
    cluster, pods = _workload(3)
    inside = solve(cluster, pods, Options(), bound=True)
    assert inside.lower_bound is not None and inside.lower_bound > 0
    results, ctx = solve_pass(cluster, pods, Options())
    assert results.new_claims == inside.new_claims and results.lower_bound is None
    assert lower_bound(ctx, results.new_claims) == inside.lower_bound
