"""Disruption budgets: how many of a NodePool's nodes may be disrupted now, per reason.

A budget's ``nodes`` is a count or a percentage of the pool's managed, initialized nodes
(percentages round up). A budget with a ``schedule`` (cron, UTC, five fields or an @-macro) is
active for ``duration`` after each time the schedule fires; one without is always active. A
budget without ``reasons`` applies to every reason. The allowance for a reason is the minimum
over the active budgets that apply to it, less the nodes already disrupting (deleting or
NotReady), floored at zero. No active budget means no limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import croniter

from karpenter.core.model.nodepool import BUDGET_REASONS, Budget, NodePool

UNLIMITED = 2**31 - 1


def schedule_active(schedule: str, duration_seconds: float, now: float) -> bool:
    """True when ``schedule`` fired within the last ``duration_seconds`` (inclusive of now)."""
    # The next firing after (now - duration) must not be later than now; croniter's get_next
    # is strictly after its start, like Go's cron.Schedule.Next that upstream uses.
    start = datetime.fromtimestamp(now, UTC) - timedelta(seconds=duration_seconds)
    fired = croniter(schedule, start).get_next(datetime)
    return bool(fired.timestamp() <= now)


def budget_active(budget: Budget, now: float) -> bool:
    """Whether the budget constrains disruption at ``now``."""
    if budget.schedule is None or budget.duration_seconds is None:
        return True
    return schedule_active(budget.schedule, budget.duration_seconds, now)


def budget_nodes(budget: Budget, total: int) -> int:
    """The budget's node count for a pool of ``total`` nodes (percentages round up)."""
    text = budget.nodes.strip()
    if text.endswith("%"):
        return math.ceil(total * int(text[:-1]) / 100)
    return int(text)


def pool_limit(pool: NodePool, reason: str, total: int, now: float) -> int:
    """The minimum over the active budgets of ``pool`` that apply to ``reason``."""
    limit = UNLIMITED
    for budget in pool.disruption.budgets:
        if budget.reasons and reason not in budget.reasons:
            continue
        if budget_active(budget, now):
            limit = min(limit, budget_nodes(budget, total))
    return limit


@dataclass(frozen=True, slots=True)
class PoolCount:
    """A pool's managed, initialized nodes and how many of them are already disrupting."""

    nodes: int = 0
    disrupting: int = 0


@dataclass(frozen=True, slots=True)
class Standing:
    """One pool's budget for one reason: what its budgets allow and who already consumes it
    (upstream's ``allowed_disruptions`` and ``nodes_consuming_budgets`` gauges)."""

    nodepool: str
    reason: str
    allowed: int
    disrupting: int


def standings(
    pools: Iterable[NodePool], counts: Mapping[str, PoolCount], now: float
) -> list[Standing]:
    """Every pool's standing for every budgeted reason, by pool then reason."""
    out = []
    for pool in sorted(pools, key=lambda p: p.name):
        count = counts.get(pool.name, PoolCount())
        for reason in BUDGET_REASONS:
            limit = pool_limit(pool, reason, count.nodes, now)
            out.append(Standing(pool.name, reason, limit, count.disrupting))
    return out


def allowances(
    pools: Iterable[NodePool], counts: Mapping[str, PoolCount], now: float
) -> dict[str, dict[str, int]]:
    """``reason → pool → allowed disruptions`` for every budgeted reason."""
    out: dict[str, dict[str, int]] = {}
    for reason in BUDGET_REASONS:
        per_pool = out.setdefault(reason, {})
        for pool in pools:
            count = counts.get(pool.name, PoolCount())
            limit = pool_limit(pool, reason, count.nodes, now)
            per_pool[pool.name] = max(limit - count.disrupting, 0)
    return out
