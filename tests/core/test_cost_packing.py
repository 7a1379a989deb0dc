"""The packing's fast paths and the coupled zone bound: vectorised fills equal the scalar
ones, a near-optimal incumbent is kept without a search (judged by a fluid bound no exact
packing beats), and pods free to go to any zone pay for whole nodes beyond the zones' spare
room."""

from __future__ import annotations

import math
import random

import pytest

from karpenter.core.provisioning import (
    bintypes,
    boundmodel,
    cover,
    fills,
    lp,
    packing,
    pricing,
    work,
)


def _random_rooms(rng: random.Random, groups: int) -> tuple[list[tuple[int, ...]], ...]:
    sizes = [tuple(rng.choice((0, 1, 3, 250, 1000)) for _ in range(3)) for _ in range(groups)]
    rooms = [tuple(rng.randrange(-5, 20_000) for _ in range(3)) for _ in range(40)]
    return sizes, rooms


@pytest.mark.parametrize("seed", range(8))
def test_vectorised_fill_equals_the_scalar_fill(seed: int) -> None:
    """For every room the array fill returns exactly ``pricing.fill``'s pattern and worth."""
    rng = random.Random(seed)
    groups = rng.randrange(1, 12)
    sizes, rooms = _random_rooms(rng, groups)
    limits = [rng.randrange(-2, 40) for _ in range(groups)]
    values = [rng.random() * rng.choice((0.0, 1.0, 3.7)) for _ in range(groups)]
    order = rng.sample(range(groups), groups)
    counts, worths = fills.fill(sizes, limits, values, fills.matrix(rooms, 3), order)
    for row, room in enumerate(rooms):
        expected = pricing.fill(sizes, limits, values, room, order)
        assert (tuple(counts[row].tolist()), worths[row]) == expected


@pytest.mark.parametrize("seed", range(8))
def test_first_holder_is_the_first_row_that_holds(seed: int) -> None:
    """The array scan finds the first capacity at least the need in every resource, or -1."""
    rng = random.Random(seed)
    capacities = [tuple(rng.randrange(0, 10) for _ in range(3)) for _ in range(rng.randrange(30))]
    need = [rng.randrange(0, 10) for _ in range(3)]
    expected = next(
        (i for i, c in enumerate(capacities) if all(a >= b for a, b in zip(c, need, strict=True))),
        -1,
    )
    assert fills.first_holder(fills.matrix(capacities, 3), need) == expected


def _small_problem(rng: random.Random) -> packing.Problem:
    """Two or three pod shapes over a handful of c/m/r-like types, one pinned kind maybe."""
    types = []
    for per_cpu, gib in ((0.0425, 2), (0.048, 4), (0.063, 8)):
        for cpu in (2, 4, 8):
            types.append(packing.BinType(round(per_cpu * cpu, 4), (cpu * 1000 - 100, cpu * gib)))
    groups = rng.randrange(2, 4)
    sizes = tuple(
        (rng.choice((250, 500, 1000, 2000)), rng.choice((1, 2, 3, 6))) for _ in range(groups)
    )
    demand = tuple(rng.randrange(1, 9) for _ in range(groups))
    kinds = [packing.Kind((0, 0), 0, tuple(range(len(types))))]
    if rng.random() < 0.5:
        kinds.append(packing.Kind((1000, 2), rng.randrange(1, 3), tuple(range(len(types)))))
    return packing.Problem(sizes, demand, tuple(types), tuple(kinds))


def _exact(problem: packing.Problem) -> float:
    """The cheapest packing, by an exact integer program over every pattern of every type."""
    groups = len(problem.demand)
    pinned = [k for k, kind in enumerate(problem.kinds) if kind.count]
    lower = [float(d) for d in problem.demand] + [float(problem.kinds[k].count) for k in pinned]
    upper = [lp.INF] * groups + [float(problem.kinds[k].count) for k in pinned]
    model = lp.Model(lower, upper)
    for k, kind in enumerate(problem.kinds):
        for t in kind.types:
            for counts in _patterns(problem, k, t):
                entries = [(g, float(n)) for g, n in enumerate(counts) if n]
                if kind.count:
                    entries.append((groups + pinned.index(k), 1.0))
                model.add_column(problem.types[t].price, entries, integer=True)
    solution = lp.solve(model, integer=True, node_limit=100_000)
    assert solution.ok
    return solution.objective


def _patterns(problem: packing.Problem, kind: int, t: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for g in range(len(problem.demand)):
        out = [(*c, n) for c in out for n in range(problem.demand[g] + 1)]
    room = problem.room(kind, t)
    return [c for c in out if pricing.fits(problem.sizes, c, room)]


@pytest.mark.parametrize("seed", range(10))
def test_fluid_bound_is_below_the_exact_optimum(seed: int) -> None:
    """No packing, not even the exact integer optimum, is cheaper than the fluid bound."""
    problem = _small_problem(random.Random(seed))
    assert packing.fluid(problem) <= _exact(problem) + 1e-9


def test_an_incumbent_at_the_fluid_bound_is_kept_without_work() -> None:
    """When the incumbent costs no more than the fluid bound allows (within ``CLOSE``), the
    packing returns it and spends no work; a dearer incumbent is searched and improved."""
    types = (packing.BinType(1.0, (1000, 4)), packing.BinType(2.0, (2000, 8)))
    kinds = (packing.Kind((0, 0), 0, (0, 1)),)
    problem = packing.Problem(((500, 2),), (4,), types, kinds)
    tight = [packing.Bin(0, 1, (4,))]  # one full bin of the larger type: the fluid price
    budget = work.Budget()
    packed = packing.pack(problem, tight, budget=budget)
    assert packed.bins == tight and budget.spent == 0
    loose = [packing.Bin(0, 1, (1,)), packing.Bin(0, 1, (3,))]  # 4.0 where 2.0 will do
    budget = work.Budget()
    packed = packing.pack(problem, loose, budget=budget)
    assert packing.cost(problem, packed.bins) == pytest.approx(2.0)
    assert budget.spent > 0


def _node(index: int, price: float, capacity: float) -> boundmodel.NodeType:
    return boundmodel.NodeType(0, index, price, (capacity,), {"a": price, "b": price})


@pytest.mark.parametrize(
    ("free_size", "expected"),
    [
        pytest.param(0.5, 3.0, id="free-pod-fits-no-spare-room"),
        pytest.param(0.1, 2.0, id="free-pod-fits-a-zones-spare-room"),
    ],
)
def test_zones_together_charges_free_pods_whole_nodes_beyond_the_spare_room(
    free_size: float, expected: float
) -> None:
    """Each zone holds a forced 0.9 pod on a node of 1.0; a pod free to go to either zone
    rides in a zone's spare 0.1 when it fits there, and otherwise costs a node of its own."""
    types = [_node(0, 1.0, 1.0)]
    forced: dict[str, list[cover.Size]] = {"a": [(0.9,)], "b": [(0.9,)]}
    free: list[cover.Free] = [((free_size,), frozenset({"a", "b"}), 1)]
    assert cover.zones_together(types, forced, free) == pytest.approx(expected)


def _beaten_one_at_a_time(
    t: int, types: list[int], prices: list[float], usable: dict[int, tuple[float, ...]]
) -> bool:
    """The scale-dominance rule written type by type: k patterns of ``t`` fit ``u`` for at
    most k times ``t``'s price (of two equal types, the first is kept)."""
    for u in types:
        if u == t:
            continue
        k = max(1, math.ceil(prices[u] / prices[t] - 1e-6))
        if prices[u] > k * prices[t] + 1e-9:
            continue
        if any(a < k * b for a, b in zip(usable[u], usable[t], strict=True)):
            continue
        if k > 1 or prices[u] < prices[t] - 1e-9 or usable[u] != usable[t] or u < t:
            return True
    return False


@pytest.mark.parametrize("seed", range(6))
def test_pricing_types_drop_exactly_those_another_type_beats_at_scale(seed: int) -> None:
    """The array dominance check keeps exactly the types the one-at-a-time rule keeps."""
    rng = random.Random(seed)
    count = rng.randrange(1, 40)
    rooms: dict[int, tuple[int, ...]] = {
        t: (rng.choice((2, 4, 8, 16)) * 1000, rng.choice((4, 8, 16, 32, 64))) for t in range(count)
    }
    prices = [round(rooms[t][0] / 1000 * rng.choice((0.04, 0.05, 0.06)), 4) for t in range(count)]
    sizes = [(500, 1), (1000, 4)]
    types = sorted(range(count), key=lambda t: (prices[t], t))
    chosen = bintypes.pricing(prices, rooms, types, sizes, (3, 2), True)
    usable = {t: bintypes._usable(rooms[t], sizes) for t in types}
    expected = tuple(t for t in types if not _beaten_one_at_a_time(t, types, prices, usable))
    assert chosen == expected
