"""The whole-bin cover proof: no packing beats a price its cover floor reaches, and the cost pass
that skips its search on that proof gives exactly what the search gives.

``unitcover`` counts each resource in units of its items' common divisor and finds the cheapest
bins covering the demand; the array program is checked against the plain one, the floor
against the exact integer optimum of small packings, and the cost pass with the proof against
the cost pass with it switched off (the search always run), on pods of the disruption
benchmark's shapes and on random constrained workloads.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Sequence

import pytest

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model.cluster import Options
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning import packing, sharing, unitcover
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import solve
from tests.core.test_cost_packing import _exact
from tests.core.test_costpass import _workload
from tests.support import builders as b


def _brute_cover(need: int, rows: list[tuple[float, int]]) -> float:
    """The cheapest cover by trying every count of every row (tiny cases)."""
    best = float("inf")
    ranges = [range(need // units + 2) for _, units in rows]
    for counts in itertools.product(*ranges):
        if sum(n * u for n, (_, u) in zip(counts, rows, strict=True)) >= need:
            best = min(best, sum(n * p for n, (p, _) in zip(counts, rows, strict=True)))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_cover_programs_agree_with_brute_force(seed: int) -> None:
    """The plain and the array program give the cheapest cover that trying every count gives."""
    rng = random.Random(seed)
    rows = [(round(rng.uniform(0.5, 9.0), 3), rng.randint(1, 9)) for _ in range(rng.randint(1, 4))]
    need = rng.randint(1, 25)
    plain = unitcover.cheapest_cover(need, rows)
    assert plain == pytest.approx(_brute_cover(need, rows), abs=1e-9)
    step = min(units for _, units in rows)
    assert unitcover._program(need, rows, step) == pytest.approx(plain, abs=1e-9)


def _fake_problem(rng: random.Random) -> packing.Problem:
    """Items of 1-3 shapes over fake-catalogue-like bins (price linear in size, net of a small
    overhead), demands small enough for the exact integer program."""
    types = tuple(
        packing.BinType(round(0.3147 * (i + 1), 4), (1000 * (i + 1) - 100, 2048 * (i + 1) - 10))
        for i in range(rng.randint(3, 10))
    )
    shapes = [(500, 1024), (1000, 2048), (1500, 4096), (1000, 4096), (250, 512)]
    sizes = tuple(rng.sample(shapes, rng.randint(1, 3)))
    demand = tuple(rng.randint(1, 6) for _ in sizes)
    free = packing.Kind((0, 0), 0, tuple(range(len(types))))
    return packing.Problem(sizes, demand, types, (free,))


def _first_fit(problem: packing.Problem) -> list[packing.Bin]:
    """Items largest first, each into the first bin with room (bins as large as any type),
    every bin then the cheapest type that holds it (as the cost pass's incumbent)."""
    bins: list[list[int]] = []
    order = sorted(range(len(problem.sizes)), key=lambda g: problem.sizes[g], reverse=True)
    for g in order:
        for _ in range(problem.demand[g]):
            for counts in bins:
                counts[g] += 1
                if problem.cheapest(0, counts) is not None:
                    break
                counts[g] -= 1
            else:
                bins.append([1 if h == g else 0 for h in range(len(problem.sizes))])
    out = []
    for counts in bins:
        t = problem.cheapest(0, counts)
        assert t is not None
        out.append(packing.Bin(0, t, tuple(counts)))
    return out


def test_a_proven_price_is_never_beaten_by_the_exact_packing() -> None:
    """Whenever the cover floor proves first fit's price, the exact integer optimum is no
    cheaper; the floor of every resource is at most that optimum; any price is proven exactly
    when the plain program's floor reaches it; some first-fit prices are proven and some are
    not (the proof is neither vacuous nor blind)."""
    seen: Counter[bool] = Counter()
    for seed in range(60):
        problem = _fake_problem(random.Random(seed))
        incumbent = _first_fit(problem)
        price = packing.cost(problem, incumbent)
        optimum = _exact(problem)
        proven = unitcover.proven(problem, price)
        seen[proven] += 1
        if proven:
            assert optimum >= price - 1e-9
        types = list(problem.kinds[0].types)
        floors = [0.0]
        for r in range(len(problem.sizes[0])):
            need, rows = unitcover.rows(problem, types, r)
            if need:
                floors.append(unitcover.cheapest_cover(need, rows))
        floor = max(floors)
        assert floor <= optimum + 1e-9
        # the decision is the plain floor's, at any price
        for delta in (-0.1, -1e-6, 0.0):
            assert unitcover.proven(problem, floor + delta), (seed, delta)
        for delta in (1e-6, 1e-3, 0.03):
            assert not unitcover.proven(problem, floor + delta), (seed, delta)
    assert seen[True] >= 10 and seen[False] >= 10


def _shapes_of_the_benchmark(seed: int) -> tuple[list[Pod], int]:
    rng = random.Random(seed)
    pods = [
        b.pod(
            f"p{i}",
            cpu=rng.choice(("1", "1500m")),
            memory=rng.choice(("512Mi", "2Gi", "4Gi")),
            labels={"app": f"a{i % 7}"},
        )
        for i in range(rng.randint(20, 300))
    ]
    return pods, rng.choice((64, 150, 400))


def _claims(results: Results) -> list[tuple[object, ...]]:
    return [
        (c.launch, tuple(it.name for it in c.instance_types), tuple(p.key for p in c.pods))
        for c in results.new_claims
    ]


def _without_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unitcover, "proven", lambda problem, price: False)


def test_the_cost_pass_with_the_proof_is_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pods of the disruption benchmark's shapes on the fake catalogue get the same claims
    (types, launch, pods) whether the proof may skip the search or the search always runs,
    and the proof does skip searches there."""
    proofs: Counter[bool] = Counter()
    real = unitcover.proven

    def counted(problem: packing.Problem, price: float) -> bool:
        answer = real(problem, price)
        proofs[answer] += 1
        return answer

    for seed in range(12):
        pods, count = _shapes_of_the_benchmark(seed)
        cluster = b.cluster([b.nodepool()], fake_instance_types(count), pods=tuple(pods))
        monkeypatch.setattr(unitcover, "proven", counted)
        fast = solve(cluster, pods, Options())
        _without_proof(monkeypatch)
        assert _claims(fast) == _claims(solve(cluster, pods, Options())), seed
    assert proofs[True] >= 5


@pytest.mark.parametrize("seed", range(40))
def test_random_workloads_repack_the_same_with_the_proof(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random workloads (zone spreads, anti-affinity, ports, limits, daemons: several classes
    per pass) get the same claims with the proof as with the search always run."""
    cluster, pods = _workload(seed)
    fast = solve(cluster, pods, Options())
    _without_proof(monkeypatch)
    assert _claims(fast) == _claims(solve(cluster, pods, Options()))


_ZONE = "topology.kubernetes.io/zone"


def _two_zones(seed: int) -> tuple[list[Pod], int]:
    """Pods of the benchmark's shapes pinned to one zone and small, memory-heavy ones to
    another: two classes per pass, the first often provable."""
    rng = random.Random(seed)
    pods = [
        b.pod(
            f"x{i}",
            cpu=rng.choice(("1", "1500m")),
            memory=rng.choice(("2Gi", "4Gi")),
            node_selector={_ZONE: "test-zone-1"},
        )
        for i in range(rng.randint(20, 200))
    ]
    pods += [
        b.pod(
            f"y{i}",
            cpu=rng.choice(("100m", "250m", "500m")),
            memory=rng.choice(("1Gi", "3Gi", "7Gi", "12Gi", "20Gi")),
            node_selector={_ZONE: "test-zone-2"},
        )
        for i in range(rng.randint(5, 60))
    ]
    return pods, rng.choice((40, 100, 200))


def test_only_the_last_class_to_search_may_skip_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Within a pass the proof is asked only after every other class has searched (an earlier
    search leaves patterns and spent work the later ones start from), such earlier classes
    are often provable, and the claims are the ones the search alone gives."""
    events: list[tuple[str, packing.Problem, float]] = []
    real_proven, real_pack = unitcover.proven, sharing.Memory.pack

    def proven(problem: packing.Problem, price: float) -> bool:
        events.append(("proof", problem, price))
        return real_proven(problem, price)

    def pack(
        memory: sharing.Memory,
        family: tuple[object, ...],
        problem: packing.Problem,
        incumbent: Sequence[packing.Bin],
        catalog: Sequence[int],
    ) -> list[packing.Bin]:
        events.append(("pack", problem, packing.cost(problem, incumbent)))
        return real_pack(memory, family, problem, incumbent, catalog)

    earlier_provable = 0
    for seed in range(30):
        pods, count = _two_zones(seed)
        cluster = b.cluster([b.nodepool()], fake_instance_types(count), pods=tuple(pods))
        monkeypatch.setattr(unitcover, "proven", proven)
        monkeypatch.setattr(sharing.Memory, "pack", pack)
        events.clear()
        fast = solve(cluster, pods, Options())
        asked = [n for n, (kind, _, _) in enumerate(events) if kind == "proof"]
        assert len(asked) <= 1, seed
        if asked:
            last = events[asked[0]][1]
            assert all(kind == "pack" and p is last for kind, p, _ in events[asked[0] + 1 :])
            earlier = events[: asked[0]]
            earlier_provable += sum(real_proven(p, price) for _, p, price in earlier)
        _without_proof(monkeypatch)
        assert _claims(fast) == _claims(solve(cluster, pods, Options())), seed
    assert earlier_provable >= 1
