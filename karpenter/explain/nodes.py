"""Why a node is, or is not, a disruption candidate: every reason, from the controller's core.

Pure: a snapshot, options and ``now`` in, a ``NodeVerdict`` out. It surveys the snapshot as the
disruption controller does (``consolidateAfter`` counted, not assumed), then, instead of
stopping at the first reason as a pass does, collects all of them for the one node: the
survey's node-level blockers (not initialized, deleting, already disrupting, node
do-not-disrupt, nominated), each pod with an active ``karpenter.sh/do-not-disrupt`` and each
pod a PodDisruptionBudget protects, consolidation disabled or not yet allowed
(``consolidateAfter`` still running), a static pool, ``WhenEmpty`` on a non-empty node, the
budget for the reason at zero, and then what the core's method says for the node alone:
pods that would not reschedule, not cheaper to replace, spot-to-spot rules, Balanced. A node
without such reasons is a candidate, and the verdict carries the command the disruption
controller would run for it (with savings) and the command its next pass would start.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter.core.disruption.candidates import (
    Blocked,
    Candidate,
    do_not_disrupt_active,
    evictable,
    pdb_blocker,
)
from karpenter.core.disruption.commands import (
    METHOD_DRIFT,
    METHOD_EMPTINESS,
    METHOD_EXPIRATION,
    METHOD_SINGLE,
    Command,
    NoOp,
)
from karpenter.core.disruption.consolidation import consolidate
from karpenter.core.disruption.context import DisruptionPass, new_pass
from karpenter.core.disruption.methods import next_command
from karpenter.core.disruption.prefilter import cannot_consolidate
from karpenter.core.disruption.simulation import reschedule
from karpenter.core.lifecycle import expires_at
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.nodepool import (
    REASON_DRIFTED,
    REASON_EMPTY,
    REASON_EXPIRED,
    REASON_UNDERUTILIZED,
    WHEN_EMPTY,
)


@dataclass(frozen=True, slots=True)
class Reason:
    """One thing that keeps the node from being disrupted (``kind`` is machine-readable)."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """The answer for one node."""

    name: str
    nodepool: str
    managed: bool
    reasons: tuple[Reason, ...]
    command: Command | None
    next_command: Command | None

    @property
    def candidate(self) -> bool:
        """Would the disruption controller act on this node (alone, or as part of a command)?"""
        return self.command is not None


# A node already being deleted or disrupted: what else would stop a disruption is moot.
_ON_ITS_WAY = frozenset({"Deleting", "Disrupting"})


class UnknownNode(LookupError):
    """The snapshot has no Node or NodeClaim of that name."""


def explain_node(cluster: Cluster, name: str, options: Options, now: float) -> NodeVerdict:
    """Every reason ``name`` is not disrupted, or the command that would disrupt it."""
    ps = new_pass(cluster, options, now, assume_consolidate_after_elapsed=False)
    state = next((s for s in ps.states if name in (s.name, s.hostname)), None)
    if state is None:
        if any(c.name == name for c in cluster.nodeclaims):
            return _verdict(name, "", (Reason("NotLaunched", "NodeClaim has no node yet"),))
        raise UnknownNode(name)
    if not state.nodepool:
        why = Reason("Unmanaged", f"node has no {lbl.NODEPOOL} label: Karpenter does not own it")
        return _verdict(state.name, "", (why,))
    reasons = [Reason(*_split(b)) for b in ps.survey.blocked if b.name == state.name]
    candidate = ps.survey.managed.get(state.name)
    if candidate is None or any(r.kind in _ON_ITS_WAY for r in reasons):
        return _verdict(state.name, state.nodepool, tuple(reasons))
    expired = _expired(ps, candidate)
    if expired is not None:
        return _verdict(state.name, state.nodepool, (), expired, _next(cluster, options, now))
    reasons += _pod_reasons(candidate, ps)
    reasons += _policy_reasons(candidate, ps)
    command: Command | None = None
    if not reasons:
        outcome = _method(ps, candidate)
        if isinstance(outcome, Reason):
            reasons.append(outcome)
        else:
            command = outcome
    nxt = _next(cluster, options, now)
    if nxt is not None and state.name in nxt.names:
        command = nxt
    return _verdict(state.name, state.nodepool, tuple(reasons), command, nxt)


def _verdict(
    name: str,
    pool: str,
    reasons: tuple[Reason, ...],
    command: Command | None = None,
    nxt: Command | None = None,
) -> NodeVerdict:
    return NodeVerdict(name, pool, bool(pool), reasons, command, nxt)


def _split(blocked: Blocked) -> tuple[str, str]:
    kind, _, message = blocked.reason.partition(": ")
    return (kind, message) if message else ("Blocked", blocked.reason)


def _next(cluster: Cluster, options: Options, now: float) -> Command | None:
    return next_command(new_pass(cluster, options, now, assume_consolidate_after_elapsed=False))


def _expired(ps: DisruptionPass, c: Candidate) -> Command | None:
    at = expires_at(c.creation, c.expire_after)
    if at is None or at > ps.now or c.state.deleting:
        return None
    outcome = reschedule(ps.cluster, [c], ps.states, ps.options, ps.reuse)
    return Command(REASON_EXPIRED, METHOD_EXPIRATION, (c,), outcome.claims, outcome.moves)


def _pod_reasons(c: Candidate, ps: DisruptionPass) -> list[Reason]:
    """Every pod that blocks a voluntary disruption (a pass names only the first)."""
    out = []
    for pod in c.state.pods:
        if pod.is_active() and do_not_disrupt_active(pod, ps.now):
            out.append(Reason("DoNotDisrupt", f"pod {pod.key} has {lbl.DO_NOT_DISRUPT}"))
    for pod in c.state.pods:
        if evictable(pod):
            blocker = pdb_blocker(pod, ps.cluster.pdbs)
            if blocker:
                out.append(Reason("PodDisruptionBudget", blocker))
    if out and c.drift and c.termination_grace is not None:
        return []  # drift with a terminationGracePeriod drains by force in the end
    return out


def _reason_for(c: Candidate) -> str:
    if c.drift:
        return REASON_DRIFTED
    return REASON_EMPTY if c.empty else REASON_UNDERUTILIZED


def _policy_reasons(c: Candidate, ps: DisruptionPass) -> list[Reason]:
    pool = c.nodepool
    out = []
    if pool.replicas is not None:
        out.append(Reason("Static", f"NodePool {pool.name} is static (replicas)"))
    if not c.drift:
        out += _consolidation_reasons(c, ps)
    reason = _reason_for(c)
    if ps.allowed(reason, pool.name) <= 0:
        out.append(
            Reason(
                "BudgetExhausted",
                f"no allowed disruptions for reason {reason} in NodePool {pool.name}",
            )
        )
    return out


def _consolidation_reasons(c: Candidate, ps: DisruptionPass) -> list[Reason]:
    pool = c.nodepool
    after = pool.disruption.consolidate_after
    if after is None:
        return [Reason("ConsolidationDisabled", f"NodePool {pool.name} has consolidateAfter Never")]
    out = []
    if not c.consolidatable:
        claim = c.state.claim
        since = claim.last_pod_event if claim is not None and claim.last_pod_event else c.creation
        left = since + after - ps.now
        out.append(
            Reason(
                "ConsolidateAfter",
                f"consolidateAfter {after:g}s has not elapsed since the last pod event"
                f" ({left:.0f}s left)",
            )
        )
    if not c.empty and pool.disruption.consolidation_policy == WHEN_EMPTY:
        out.append(
            Reason(
                "WhenEmpty",
                f"NodePool {pool.name} has consolidation policy WhenEmpty, but node is not empty",
            )
        )
    if not c.empty and (c.instance_type is None or not c.zone or not c.capacity_type):
        out.append(Reason("Unconsolidatable", "instance type, zone or capacity type unknown"))
    return out


def _method(ps: DisruptionPass, c: Candidate) -> Command | Reason:
    """What the method that applies to the node says for it alone."""
    if c.drift:
        outcome = reschedule(ps.cluster, [c], ps.states, ps.options, ps.reuse)
        if outcome.failures:
            return Reason("Unschedulable", outcome.failure_message())
        return Command(REASON_DRIFTED, METHOD_DRIFT, (c,), outcome.claims, outcome.moves)
    if c.empty:
        return Command(REASON_EMPTY, METHOD_EMPTINESS, (c,))
    quick = cannot_consolidate(ps, [c])
    if quick:
        return Reason(*_split(Blocked(c.name, quick)))
    result = consolidate(ps, [c], METHOD_SINGLE)
    if isinstance(result, NoOp):
        return Reason(result.kind, result.message)
    return result
