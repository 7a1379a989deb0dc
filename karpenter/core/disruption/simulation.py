"""Where the candidates' pods would go: the provisioning solver run on the snapshot without them.

The pass schedules, as upstream's consolidation simulation does, the pending pods, the
candidates' reschedulable pods and the pods of nodes already deleting or held by an in-flight
command (``karpenter.sh/disrupted`` taint), on every other node (candidates and those nodes left
out), so a new command never counts on room an in-flight command's pods will take. Only the
candidates' pods matter to the outcome: pending pods compete for the same room but their own
failures and NodeClaims are not the command's business, so NodeClaims that hold none of the
candidates' pods are dropped. CapacityBuffer virtual pods the cluster hosts (``headroom``) are
scheduled too and are the command's business: NodeClaims holding them are kept, and those left
without room are reported (``Outcome.homeless``).

The plan's placement is not the kube-scheduler's, so a command found this way is played once
more as the scheduler would bind its pods (``stranded``: ``provisioning/binding``, with the
command's replacements up, as ``replacement_node`` builds them): the pods it would leave
without a node, and what the provisioner would buy for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from karpenter.core.disruption import headroom
from karpenter.core.disruption.candidates import Candidate, in_flight, reschedulable
from karpenter.core.lifecycle import nodepool_hash
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.node import Node
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning import binding
from karpenter.core.provisioning.build import Reuse
from karpenter.core.provisioning.existing import StateNode
from karpenter.core.provisioning.podwork import unconstrained
from karpenter.core.provisioning.reservations import FALLBACK
from karpenter.core.provisioning.results import NewNodeClaim, Results
from karpenter.core.provisioning.scheduler import repack_kept, solve, solve_kept

# Key of a list in the snapshot's derived values (``Reuse.derived``): while present, every
# what-if on the snapshot appends its Outcome there (``verdicts`` reads where pods went).
OUTCOMES = "disruption.outcomes"

Placed = tuple[tuple[res.Resources, str], ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The candidates' pods after one simulated pass."""

    claims: tuple[NewNodeClaim, ...]
    moves: tuple[tuple[str, str], ...]
    failures: tuple[tuple[str, str], ...]
    uninitialized: tuple[str, ...]
    # hosted buffer pods the what-if found no room for (consolidation refuses to lose them)
    homeless: tuple[str, ...] = ()
    # What a split after this what-if depends on (``retries``): where every pod of the pass
    # went (a node, "#i" for the i-th new NodeClaim, "!" nowhere), in order; or, when no pod
    # of the pass has topology or volume constraints and no NodePool has limits, only the
    # pods that need new capacity (and how first fit grouped them) and where the candidates'
    # pods would meet an uninitialized node: a split repacks those NodeClaims alone.
    trace: tuple[object, ...] = ()
    # Every pod of the pass: its requests and the existing node it went to ("" for a
    # NodeClaim or nowhere), worked out when called (only a kept "no" reads it). Set only
    # while OUTCOMES is collected.
    placed: Callable[[], Placed] = field(default=tuple, compare=False, repr=False)

    def failure_message(self) -> str:
        """A one-line summary of the pods that could not be placed."""
        shown = "; ".join(f"{key}: {reason}" for key, reason in self.failures[:3])
        more = f" (and {len(self.failures) - 3} more)" if len(self.failures) > 3 else ""
        return f"{len(self.failures)} pod(s) cannot be rescheduled: {shown}{more}"


def pending_pods(cluster: Cluster) -> list[Pod]:
    """Pods waiting for a node (the ones provisioning would schedule)."""
    return [
        p
        for p in cluster.pods
        if not p.node_name and p.is_active() and not p.is_daemonset_pod() and not p.is_mirror_pod()
    ]


def waiting_pods(
    cluster: Cluster, states: Sequence[StateNode], reuse: Reuse | None = None
) -> list[Pod]:
    """The pending pods and the reschedulable pods of in-flight nodes (deleting, or held by a
    command), as every what-if on the snapshot schedules them (computed once per snapshot)."""

    def waiting() -> list[Pod]:
        deleting = [
            replace(p, node_name="")
            for s in states
            if in_flight(s)
            for p in s.pods
            if reschedulable(p)
        ]
        return [*pending_pods(cluster), *deleting]

    return waiting() if reuse is None else reuse.derived(cluster, "disruption.waiting", waiting)


def _unbound(c: Candidate) -> list[Pod]:
    return [replace(p, node_name="") for p in c.pods]


@dataclass(frozen=True, slots=True)
class _WhatIf:
    """The pods of one what-if: everyone it schedules, and which are the command's."""

    everyone: list[Pod]
    keys: set[str]  # the candidates' pods
    held: set[str]  # the buffer pods they host
    excluded: frozenset[str]


def _what_if(
    cluster: Cluster,
    candidates: Sequence[Candidate],
    states: Sequence[StateNode],
    options: Options,
    reuse: Reuse | None,
) -> _WhatIf:
    moving: list[Pod] = []
    for c in candidates:
        # The same candidate's pods are unbound once per snapshot, not once per what-if.
        unbound = partial(_unbound, c)
        if reuse is None:
            moving += unbound()
        else:
            moving += reuse.derived(cluster, f"disruption.unbound:{c.name}", unbound)
    # Pending and deleting pods are the same for every what-if on one snapshot.
    others = waiting_pods(cluster, states, reuse)
    buffered = headroom.hosting(cluster, options, reuse, others).pods
    return _WhatIf(
        [*others, *buffered, *moving],
        {p.key for p in moving},
        {p.key for p in buffered},
        frozenset(c.name for c in candidates),
    )


def reschedule(
    cluster: Cluster,
    candidates: Sequence[Candidate],
    states: Sequence[StateNode],
    options: Options,
    reuse: Reuse | None = None,
    *,
    repack: bool = False,
) -> Outcome:
    """Simulate removing ``candidates``; ``states`` are the snapshot's state nodes.

    ``repack`` runs the cost pass over the new NodeClaims (a split: several cheaper ones)."""
    w = _what_if(cluster, candidates, states, options, reuse)
    results = solve(
        cluster,
        w.everyone,
        options,
        excluded_nodes=w.excluded,
        reuse=reuse,
        # A what-if must not stall on reserved capacity: replacements may fall back.
        reservation_mode=FALLBACK,
        # First fit answers "do the pods fit elsewhere?"; splitting is consolidation's call.
        repack=repack,
    )
    return _outcome(cluster, states, reuse, w, results)


def reschedule_kept(
    cluster: Cluster,
    candidates: Sequence[Candidate],
    states: Sequence[StateNode],
    options: Options,
    reuse: Reuse | None = None,
) -> tuple[Outcome, Callable[[], Outcome]]:
    """``reschedule`` (first fit), and what ``reschedule(..., repack=True)`` would give on
    the same snapshot, computed when called from the same first fit (a split after a what-if
    repacks the claims the what-if found; call it at most once, before anything else is
    simulated)."""
    w = _what_if(cluster, candidates, states, options, reuse)
    results, kept = solve_kept(
        cluster,
        w.everyone,
        options,
        excluded_nodes=w.excluded,
        reuse=reuse,
        reservation_mode=FALLBACK,
    )
    outcome = _outcome(cluster, states, reuse, w, results)
    return outcome, lambda: _outcome(cluster, states, reuse, w, repack_kept(kept))


def _outcome(
    cluster: Cluster,
    states: Sequence[StateNode],
    reuse: Reuse | None,
    w: _WhatIf,
    results: Results,
) -> Outcome:
    keys, held, everyone = w.keys, w.held, w.everyone
    claims = tuple(
        c for c in results.new_claims if any(p.key in keys or p.key in held for p in c.pods)
    )
    moves: list[tuple[str, str]] = []
    uninitialized: list[str] = []
    initialized: dict[str, bool] = (
        {s.name: s.initialized for s in states}
        if reuse is None
        else reuse.derived(
            cluster, "disruption.initialized", lambda: {s.name: s.initialized for s in states}
        )
    )
    for node_name, pods in results.existing:
        mine = [p.key for p in pods if p.key in keys]
        moves.extend((key, node_name) for key in mine)
        if mine and not initialized.get(node_name, True):
            uninitialized.append(node_name)
    for index, claim in enumerate(claims):
        moves.extend((p.key, f"replacement:{index}") for p in claim.pods if p.key in keys)
    failures = tuple(sorted((k, r) for k, r in results.unschedulable.items() if k in keys))
    homeless = tuple(sorted(k for k in results.unschedulable if k in held))
    # buffer pods are part of what a split depends on: a split must find them room too
    trace: tuple[object, ...]
    if any(p.limits for p in cluster.nodepools) or not all(unconstrained(p) for p in everyone):
        where = _where(results)
        trace = tuple((p.key, where.get(p.key, "!")) for p in everyone)
    else:
        claimed = tuple(tuple(p.key for p in c.pods) for c in results.new_claims)
        trace = (claimed, tuple(sorted(results.unschedulable)), tuple(uninitialized))
    outcome = Outcome(
        claims,
        tuple(sorted(moves)),
        failures,
        tuple(uninitialized),
        homeless=homeless,
        trace=trace,
    )
    sink = reuse.snapshot(cluster).derived.get(OUTCOMES) if reuse is not None else None
    if isinstance(sink, list):
        outcome = replace(outcome, placed=partial(_placed, everyone, results))
        sink.append(outcome)
    return outcome


def _where(results: Results) -> dict[str, str]:
    """Where each pod of the pass went: its node, or "#i" for the i-th new NodeClaim."""
    where = {p.key: node for node, pods in results.existing for p in pods}
    for i, claim in enumerate(results.new_claims):
        where.update((p.key, f"#{i}") for p in claim.pods)
    return where


def _placed(everyone: Sequence[Pod], results: Results) -> Placed:
    """Each pod's requests and the existing node it went to ("" for a NodeClaim or nowhere)."""
    where = _where(results)
    placed = ((p.requests, where.get(p.key, "")) for p in everyone)
    return tuple((r, "" if node.startswith("#") else node) for r, node in placed)


def replacement_node(claim: NewNodeClaim, name: str, cluster: Cluster, now: float) -> Node:
    """The Node a replacement NodeClaim becomes: initialized, of its pool's current template."""
    launched = next(it for it in claim.instance_types if it.name == claim.launch.instance_type)
    labels = dict(claim.labels)
    labels[lbl.HOSTNAME] = name
    labels[lbl.NODEPOOL] = claim.nodepool
    labels[lbl.REGISTERED] = "true"
    labels[lbl.INITIALIZED] = "true"
    annotations: dict[str, str] = {}
    pool = next((p for p in cluster.nodepools if p.name == claim.nodepool), None)
    if pool is not None:
        annotations[lbl.NODEPOOL_HASH] = nodepool_hash(pool)
        annotations[lbl.NODEPOOL_HASH_VERSION] = lbl.NODEPOOL_HASH_VERSION_CURRENT
    return Node(
        name=name,
        labels=dict(sorted(labels.items())),
        annotations=annotations,
        taints=claim.taints,
        capacity=dict(launched.capacity),
        allocatable=launched.allocatable,
        provider_id=f"simulated://{name}",
        creation=now,
    )


def stranded(
    cluster: Cluster,
    candidates: Sequence[Candidate],
    states: Sequence[StateNode],
    options: Options,
    reuse: Reuse | None,
    replacements: Sequence[NewNodeClaim],
    now: float,
) -> binding.Binding:
    """Where the kube-scheduler would bind the pods once the command's ``replacements`` are
    up and the candidates drained (``binding``: each pod, as it arrives, on the fitting node
    its scoring ranks first): ``stranded`` lists the candidates' pods it leaves without a
    node, in eviction order, and ``claims`` the NodeClaims the provisioner would buy for them.

    The pods a what-if schedules, in the order they reach the scheduler's queue: the pending
    ones first, then those of in-flight nodes, then the candidates' in candidate order.
    CapacityBuffer virtual pods are never bound, so they take no room here."""
    w = _what_if(cluster, candidates, states, options, reuse)
    pods = [p for p in w.everyone if p.key not in w.held]
    if reuse is not None and binding.surely_bound(
        cluster, pods, excluded_nodes=w.excluded, reuse=reuse
    ):
        # room to spare without the replacements: no pod is stranded, whatever the order
        return binding.Binding({}, ())
    names = [f"stranding-check-replacement-{i}" for i in range(len(replacements))]
    joined = tuple(
        replacement_node(claim, name, cluster, now)
        for claim, name in zip(replacements, names, strict=True)
    )
    bound = binding.bind(
        cluster, pods, options, excluded_nodes=w.excluded, reuse=reuse, joined=joined, buy=True
    )
    # The candidates' business only: other pending pods would buy their nodes anyway.
    mine = w.keys
    return binding.Binding(
        bound.nodes,
        tuple(key for key in bound.stranded if key in mine),
        tuple(c for c in bound.claims if any(p.key in mine for p in c.pods)),
        tuple(key for key in bound.homeless if key in mine),
    )


def stranded_message(bound: binding.Binding, savings: float) -> str:
    """Why a command is refused for pods the kube-scheduler would strand."""
    keys = bound.stranded
    shown = ", ".join(keys[:3])
    more = f" (and {len(keys) - 3} more)" if len(keys) > 3 else ""
    cost = (
        "no new NodeClaim would hold them"
        if bound.homeless
        else f"new capacity for them costs {bound.price:.4f}/h against savings of {savings:.4f}/h"
    )
    return (
        f"{len(keys)} evicted pod(s) would find no node as the kube-scheduler binds them"
        f" (each on its best-scoring node): {shown}{more}; {cost}"
    )


def homeless_message(outcome: Outcome) -> str:
    """Why a command would lose CapacityBuffer headroom (the hosted pods left without room)."""
    shown = ", ".join(outcome.homeless[:3])
    more = f" (and {len(outcome.homeless) - 3} more)" if len(outcome.homeless) > 3 else ""
    return f"capacity buffer pod(s) would lose their room: {shown}{more}"
