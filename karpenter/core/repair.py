"""Node repair decisions: which unhealthy nodes to replace now, and which to hold back.

A cloud provider names the Node conditions that justify replacing a node and how long each may
last (its repair policies). A node whose condition has matched a policy for the policy's
toleration is due for repair. Repair never takes out more than 20% of a NodePool at once
(rounded up; NodeClaims without a pool count against the whole cluster): if more of the pool is
unhealthy than that, the node is held back, because a fleet-wide condition (a bad AMI, a
network outage) is not fixed by replacing every node, and doing so would take the workload down.
Pure: conditions and the clock come in, decisions go out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_UNHEALTHY_FRACTION = 0.2


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A Node condition that, held this long, makes the node worth replacing."""

    condition_type: str
    condition_status: str
    toleration_seconds: float


@dataclass(frozen=True, slots=True)
class Condition:
    """A Node condition as the decision needs it (since: its lastTransitionTime)."""

    type: str
    status: str
    since: float | None


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """One managed node: its NodeClaim, pool and conditions."""

    node: str
    claim: str
    nodepool: str
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """A node matching a policy: repair now, or held (``blocked``) by the 20% guard; ``due``
    is when the toleration runs out (not yet due: nothing to do before then)."""

    node: NodeHealth
    policy: RepairPolicy
    due: float
    blocked: bool = False


def matching(node: NodeHealth, policies: Sequence[RepairPolicy]) -> tuple[RepairPolicy, float]:
    """The policy the node matches that falls due first, and when (``math.inf``: none)."""
    best: tuple[RepairPolicy, float] | None = None
    for cond in node.conditions:
        for policy in policies:
            if (cond.type, cond.status) != (policy.condition_type, policy.condition_status):
                continue
            due = (cond.since or 0.0) + policy.toleration_seconds
            if best is None or due < best[1]:
                best = (policy, due)
    return best if best is not None else (RepairPolicy("", "", 0.0), math.inf)


def allowed_unhealthy(total: int) -> int:
    """How many of ``total`` nodes may be unhealthy and still be repaired (20%, rounded up)."""
    return math.ceil(total * MAX_UNHEALTHY_FRACTION)


def decide(
    nodes: Sequence[NodeHealth], policies: Sequence[RepairPolicy], now: float
) -> list[Decision]:
    """Every node matching a policy, due or not, with the 20% guard applied per pool."""
    if not policies:
        return []
    totals: dict[str, int] = {}
    unhealthy: dict[str, int] = {}
    found: list[tuple[NodeHealth, RepairPolicy, float]] = []
    for node in nodes:
        totals[node.nodepool] = totals.get(node.nodepool, 0) + 1
        policy, due = matching(node, policies)
        if due != math.inf:
            unhealthy[node.nodepool] = unhealthy.get(node.nodepool, 0) + 1
            found.append((node, policy, due))
    cluster_total = len(nodes)
    out = []
    for node, policy, due in sorted(found, key=lambda f: (f[2], f[0].node)):
        pool = node.nodepool
        total = totals[pool] if pool else cluster_total
        sick = unhealthy[pool] if pool else sum(unhealthy.values())
        blocked = due <= now and sick > allowed_unhealthy(total)
        out.append(Decision(node, policy, due, blocked))
    return out


def due_now(decisions: Sequence[Decision], now: float) -> list[Decision]:
    """The decisions to carry out now (due and not blocked)."""
    return [d for d in decisions if d.due <= now and not d.blocked]


def next_check(decisions: Sequence[Decision], now: float, blocked_retry_s: float) -> float | None:
    """Seconds until something may change without an event: the next toleration running out,
    or the retry of a blocked repair."""
    waits = [d.due - now for d in decisions if d.due > now]
    waits += [blocked_retry_s for d in decisions if d.blocked]
    return min(waits) if waits else None
