"""The cost pass's work budget: counted work never exceeds it, and a cut-short pass stays valid.

Work is counted (simplex iterations, search and branch-and-bound nodes, greedy fills), never
timed: the packing's own counter is checked against the limit over a sweep of limits, and every
answer on the way is checked to be a valid packing no dearer than first fit.
"""

from __future__ import annotations

import pytest

from karpenter.core.model.cluster import Options
from karpenter.core.provisioning import packing, work
from karpenter.core.provisioning.scheduler import solve
from tests.core.test_costpass import _verify_claim, _verify_limits, _verify_spreads, _workload

GIB = 1 << 30


def _problem() -> tuple[packing.Problem, list[packing.Bin]]:
    """Four pod shapes over c/m/r types of 2..64 CPUs (prices per CPU like EC2), and the
    incumbent first fit would give: each shape on bins of the largest type."""
    types = []
    for gib, per_cpu in ((2, 0.0425), (4, 0.048), (8, 0.063)):
        for cpu in (2, 4, 8, 16, 32, 48, 64):
            capacity = (cpu * 1000 - 100, cpu * gib * GIB - GIB // 4, 110)
            types.append(packing.BinType(round(per_cpu * cpu, 4), capacity))
    sizes = ((3000, 2 * GIB, 1), (250, GIB // 2, 1), (8000, 30 * GIB, 1), (1000, 3 * GIB, 1))
    demand = (17, 31, 3, 11)
    kinds = (packing.Kind((0, 0, 0), 0, tuple(range(len(types)))),)
    problem = packing.Problem(sizes, demand, tuple(types), kinds)
    largest = max(range(len(types)), key=lambda t: (types[t].price, t))
    incumbent = []
    for g, n in enumerate(demand):
        room = problem.room(0, largest)
        per_bin = min(r // s for r, s in zip(room, sizes[g], strict=True) if s)
        for start in range(0, n, per_bin):
            take = min(n - start, per_bin)
            counts = tuple(take if h == g else 0 for h in range(len(demand)))
            incumbent.append(packing.Bin(0, largest, counts))
    assert packing.feasible(problem, incumbent)
    return problem, incumbent


def test_packing_never_spends_more_than_its_budget() -> None:
    """Over a sweep of limits the packing's counted work stays within the limit, and every
    answer is a valid packing no dearer than the incumbent."""
    problem, incumbent = _problem()
    full = work.Budget(10**9)
    unlimited = packing.pack(problem, incumbent, budget=full)
    assert 0 < full.spent < 10**9
    limits = sorted({*range(0, 400, 37), *range(400, full.spent + 500, max(full.spent // 40, 1))})
    cut_short_and_cheaper = 0
    for limit in limits:
        budget = work.Budget(limit)
        packed = packing.pack(problem, incumbent, budget=budget)
        assert budget.spent <= limit, (limit, budget.spent)
        assert packing.feasible(problem, packed.bins)
        assert packing.cost(problem, packed.bins) <= packing.cost(problem, incumbent) + 1e-9
        if budget.spent == limit and packing.cost(problem, packed.bins) < packing.cost(
            problem, incumbent
        ):
            cut_short_and_cheaper += 1
    assert cut_short_and_cheaper > 0  # a pass stopped by its budget still keeps its progress
    assert packing.cost(problem, unlimited.bins) < packing.cost(problem, incumbent)


def test_a_budget_that_is_not_reached_changes_nothing() -> None:
    """With more budget than the packing needs the answer and the work are those of the
    default budget, on every run (the budget is a count, not a clock)."""
    problem, incumbent = _problem()
    answers = []
    for limit in (work.Budget().limit, 10**9, 10**9):
        budget = work.Budget(limit)
        answers.append((packing.pack(problem, incumbent, budget=budget).bins, budget.spent))
    assert answers[0] == answers[1] == answers[2]


def test_zero_budget_keeps_first_fit() -> None:
    """A budget of zero units does no work and keeps first fit's claims exactly."""
    cluster, pods = _workload(3)
    first = solve(cluster, pods, Options(cost_policy="firstfit"))
    none = solve(cluster, pods, Options(cost_work=0))
    assert none.cost_work == 0
    assert [(c.launch, [p.key for p in c.pods]) for c in none.new_claims] == [
        (c.launch, [p.key for p in c.pods]) for c in first.new_claims
    ]


@pytest.mark.parametrize("seed", range(12))
def test_cost_pass_within_its_budget_keeps_every_rule(seed: int) -> None:
    """Whatever the budget, a pass spends at most it, places the same pods, keeps every rule
    and costs no more than first fit."""
    cluster, pods = _workload(seed)
    first = solve(cluster, pods, Options(cost_policy="firstfit"))
    spent = solve(cluster, pods, Options()).cost_work
    for limit in sorted({1, 50, 300, spent // 3, spent // 2, spent - 1}):
        if limit <= 0:
            continue
        results = solve(cluster, pods, Options(cost_work=limit))
        assert results.cost_work <= limit
        assert set(results.unschedulable) == set(first.unschedulable)
        assert results.price <= first.price + 1e-9
        placed = sorted(p.key for c in results.new_claims for p in c.pods)
        assert placed == sorted(p.key for c in first.new_claims for p in c.pods)
        for claim in results.new_claims:
            _verify_claim(claim, cluster)
        _verify_spreads(results, pods)
        _verify_limits(results, cluster)
