"""The disruption methods, each turning one pass into at most one command.

In upstream's order, the first method that yields a command acts in a pass:
emptiness (every empty candidate within budget, one delete), drift (the oldest drifted
candidate whose pods all fit elsewhere, replaced by as many NodeClaims as it needs),
multi-node consolidation (the longest prefix of up to 100 ranked candidates that consolidates,
found by binary search as upstream does) and single-node consolidation (the first candidate,
round-robin over NodePools, that consolidates). Between the two, candidates that can all be
deleted together are gathered greedily into one delete (``repack.batch_delete``); last, when
nothing else acts, repack (the most wasteful candidates' pods packed onto fewer, fuller nodes:
``repack``). Expiration is not budgeted and ignores
do-not-disrupt and PDBs: a node past ``expireAfter`` is deleted, its pods rescheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from karpenter.core.disruption import repack
from karpenter.core.disruption.bound import MULTI, SINGLE
from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.commands import (
    METHOD_DRIFT,
    METHOD_EMPTINESS,
    METHOD_EXPIRATION,
    METHOD_MULTI,
    METHOD_SINGLE,
    Command,
    NoOp,
)
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.disruption.simulation import reschedule
from karpenter.core.disruption.verdicts import PREFILTER, judge
from karpenter.core.lifecycle import expires_at
from karpenter.core.model.nodepool import (
    REASON_DRIFTED,
    REASON_EMPTY,
    REASON_EXPIRED,
    REASON_UNDERUTILIZED,
    WHEN_EMPTY,
)

MAX_MULTI_CANDIDATES = 100


def _ranked(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Consolidation order: price per disruption cost, highest first (ties by name)."""
    return sorted(candidates, key=lambda c: (-c.savings_ratio, c.name))


def _budget_note(ps: DisruptionPass, c: Candidate, reason: str) -> None:
    ps.note(
        c.name,
        f"BudgetExhausted: no allowed disruptions for reason {reason} in NodePool"
        f" {c.nodepool.name}",
    )


def expiration(ps: DisruptionPass) -> Command | None:
    """The earliest-expired managed node, deleted and its pods rescheduled."""
    expired = []
    managed = ps.index.expired(ps.now) if ps.index is not None else ps.survey.managed.values()
    for c in managed:
        at = expires_at(c.creation, c.expire_after)
        if at is not None and at <= ps.now and not c.state.deleting:
            expired.append((at, c.name, c))
    if not expired:
        return None
    _, _, c = min(expired)
    outcome = reschedule(ps.cluster, [c], ps.states, ps.options, ps.reuse)
    return Command(REASON_EXPIRED, METHOD_EXPIRATION, (c,), outcome.claims, outcome.moves)


def emptiness(ps: DisruptionPass) -> Command | None:
    """Every empty, consolidatable candidate within its pool's budget, in one delete."""
    chosen = []
    for c in ps.index.empty() if ps.index is not None else _ranked(ps.candidates):
        if not c.empty or c.nodepool.disruption.consolidate_after is None:
            continue
        if c.nodepool.replicas is not None:
            continue  # a static NodePool keeps its nodes, empty or not
        if not c.consolidatable:
            continue
        if c.pod_blocker:
            ps.note(c.name, f"PodBlocked: {c.pod_blocker}")
            continue
        if not ps.take(REASON_EMPTY, c.nodepool.name):
            _budget_note(ps, c, REASON_EMPTY)
            continue
        chosen.append(c)
    if not chosen:
        return None
    return Command(REASON_EMPTY, METHOD_EMPTINESS, tuple(chosen))


def drift(ps: DisruptionPass) -> Command | None:
    """The first drifted candidate (empty ones first, then oldest) that can be replaced."""
    drifted = []
    for c in ps.index.drifted() if ps.index is not None else ps.candidates:
        if not c.drift:
            continue
        # Eventual disruption: a NodeClaim with terminationGracePeriod drains by force in
        # the end, so pod-level blockers do not hold drift back.
        if c.pod_blocker and c.termination_grace is None:
            ps.note(c.name, f"PodBlocked: {c.pod_blocker}")
            continue
        drifted.append(c)
    drifted.sort(key=lambda c: (not c.empty, c.creation, c.name))
    for c in drifted:
        if ps.allowed(REASON_DRIFTED, c.nodepool.name) <= 0:
            _budget_note(ps, c, REASON_DRIFTED)
            continue
        outcome = reschedule(ps.cluster, [c], ps.states, ps.options, ps.reuse)
        if outcome.failures:
            ps.note(c.name, f"Unschedulable: {outcome.failure_message()}")
            continue
        ps.take(REASON_DRIFTED, c.nodepool.name)
        return Command(REASON_DRIFTED, METHOD_DRIFT, (c,), outcome.claims, outcome.moves)
    return None


def consolidation_candidates(ps: DisruptionPass) -> list[Candidate]:
    """Candidates consolidation may act on, ranked; notes say why others were passed over."""
    out = []
    for c in ps.candidates:
        pool = c.nodepool
        if c.empty:
            continue
        if pool.disruption.consolidate_after is None:
            ps.note(c.name, f"Unconsolidatable: NodePool {pool.name} has consolidation disabled")
            continue
        if pool.replicas is not None:
            ps.note(c.name, f"Unconsolidatable: NodePool {pool.name} is static (replicas)")
            continue
        if pool.disruption.consolidation_policy == WHEN_EMPTY:
            ps.note(
                c.name,
                f"Unconsolidatable: NodePool {pool.name} has consolidation policy WhenEmpty,"
                " but node is not empty",
            )
            continue
        if c.instance_type is None or not c.zone or not c.capacity_type:
            ps.note(c.name, "Unconsolidatable: instance type, zone or capacity type unknown")
            continue
        if not c.consolidatable:
            continue
        if c.pod_blocker:
            ps.note(c.name, f"PodBlocked: {c.pod_blocker}")
            continue
        out.append(c)
    return _ranked(out)


def _ranked_for_consolidation(ps: DisruptionPass) -> Iterable[Candidate]:
    return ps.index.ranked() if ps.index is not None else consolidation_candidates(ps)


def _multi_chosen(ps: DisruptionPass) -> list[Candidate]:
    """The first ranked candidates within their pools' budgets (at most 100)."""
    taken: dict[str, int] = {}
    chosen: list[Candidate] = []
    for c in _ranked_for_consolidation(ps):
        pool = c.nodepool.name
        if ps.allowed(REASON_UNDERUTILIZED, pool) - taken.get(pool, 0) <= 0:
            continue
        taken[pool] = taken.get(pool, 0) + 1
        chosen.append(c)
        if len(chosen) == MAX_MULTI_CANDIDATES:
            break
    return chosen


def multi_node(ps: DisruptionPass) -> Command | None:
    """The largest ranked prefix (2..100 candidates) that consolidates (upstream's search)."""
    chosen = _multi_chosen(ps)
    if len(chosen) < 2:
        return None
    low, high = 1, len(chosen) - 1
    best: Command | None = None
    if ps.bound is not None:
        ps.bound.begin(MULTI)
    while low <= high:
        if ps.over(MULTI):
            break  # act on the largest prefix found so far, as upstream does on its timeout
        mid = (low + high) // 2
        result = judge(ps, chosen[: mid + 1], METHOD_MULTI)
        if isinstance(result, Command):
            best = result
            low = mid + 1
        else:
            high = mid - 1
    if best is not None:
        for c in best.candidates:
            ps.take(REASON_UNDERUTILIZED, c.nodepool.name)
    return best


def _round_robin(candidates: Sequence[Candidate]) -> list[Candidate]:
    queues: dict[str, list[Candidate]] = {}
    for c in candidates:
        queues.setdefault(c.nodepool.name, []).append(c)
    out: list[Candidate] = []
    depth = 0
    while len(out) < len(candidates):
        for queue in queues.values():
            if depth < len(queue):
                out.append(queue[depth])
        depth += 1
    return out


def _single_order(ps: DisruptionPass) -> Iterator[Candidate]:
    if ps.index is not None:
        # Pools without budget and candidates with a kept "no" are skipped, notes unkept.
        return ps.index.round_robin(
            lambda pool: ps.allowed(REASON_UNDERUTILIZED, pool) > 0,
            lambda: ps.splits_left > 0,
        )
    ranked = _round_robin(consolidation_candidates(ps))
    return iter(ps.resume.order(ranked) if ps.bound is not None else ranked)


def single_node(ps: DisruptionPass) -> Command | None:
    """The first candidate (ranked, round-robin over pools) that consolidates on its own;
    under a bound, none once it is over (the next pass resumes after the judged ones)."""
    judged: list[str] = []
    if ps.bound is not None:
        ps.bound.begin(SINGLE)
    for c in _single_order(ps):
        if ps.allowed(REASON_UNDERUTILIZED, c.nodepool.name) <= 0:
            _budget_note(ps, c, REASON_UNDERUTILIZED)
            continue
        if ps.over(SINGLE):
            ps.resume.walked(judged, complete=False)
            return None
        judged.append(c.name)
        result = judge(ps, [c], METHOD_SINGLE)
        if isinstance(result, NoOp):
            note = (
                result.message if result.kind == PREFILTER else f"{result.kind}: {result.message}"
            )
            ps.note(c.name, note)
            continue
        # The resume is left as it is: the validation's second decision must walk the same
        # order to name the same candidate.
        ps.take(REASON_UNDERUTILIZED, c.nodepool.name)
        return result
    if ps.bound is not None:
        ps.resume.walked(judged, complete=True)
    return None


def batch_delete(ps: DisruptionPass) -> Command | None:
    """Candidates that can all be deleted together, gathered greedily (``repack``); not after
    the bound cut multi-node short."""
    if ps.timeouts:
        return None
    if ps.index is not None:
        return repack.batch_delete(ps, ps.index.wasteful(), ps.index.known)
    return repack.batch_delete(ps, repack.wasteful(consolidation_candidates(ps)))


def repack_node(ps: DisruptionPass) -> Command | None:
    """The most wasteful candidates repacked onto fewer, fuller nodes (``repack``); not after
    the bound cut a search of this pass short (the next pass walks on first)."""
    if ps.timeouts or not ps.options.repack_consolidation:
        return None
    return repack.repack(ps, list(_ranked_for_consolidation(ps)))


def next_command(ps: DisruptionPass, *, settling: bool = False) -> Command | None:
    """The one command this pass carries out (expiration first, then upstream's order, then
    repack when nothing else acts).

    ``settling``: pods are on the move (evicted, awaiting the kube-scheduler), so the snapshot
    does not yet show where they will run; only the methods whose commands start at once
    (expiration, drift) act. Emptiness and consolidation would be judged again after the
    validation wait on a cluster where the scheduler put those pods by its own scoring, on
    the least-allocated nodes: the very candidates such a decision picked.
    """
    if settling:
        methods: tuple[Callable[[DisruptionPass], Command | None], ...] = (expiration, drift)
    else:
        methods = (expiration, emptiness, drift, multi_node, batch_delete, single_node, repack_node)
    for method in methods:
        command = method(ps)
        if command is not None:
            return command
    return None
