"""Verifying the cost pass: replay the whole pass with the solver's own predicates.

Topology counts go back to where the pass started; then every placement of the first pass is
redone in its commit order. Pods on existing nodes and on claims the cost pass leaves alone are
counted exactly as before; every other pod is offered to its planned claim through
``targets.try_claim`` (requirements, taints, host ports, resources with daemon overhead, volume
topology, topology spread and pod (anti-)affinity, minValues) and committed as the scheduler
commits. A planned claim is created at its first pod with the NodePool-limit mask the scheduler
would give it at that point. Every pod is counted with the requirements the first pass counted
it with (its new claim already carries the class's final zone, which the first pass may not
have known yet); with classes keeping their zones and the order the first pass's, zone-scoped
counts evolve exactly as they did then. A pod the predicates refuse fails its whole class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from karpenter.core.provisioning.build import PassContext
from karpenter.core.provisioning.costpass import Placement, Planned, Start
from karpenter.core.provisioning.results import finalize_claim
from karpenter.core.provisioning.targets import Claim, ClaimFit, Existing, try_claim
from karpenter.core.provisioning.topology import Reject


def replay(
    ctx: PassContext,
    placements: Sequence[Placement],
    start: Start,
    targets: Mapping[int, Planned],
) -> set[int]:
    """Redo the pass with ``targets`` (placement index -> planned claim); failed plan keys."""
    start.restore()
    for stale in targets.values():
        stale.claim = None  # a previous attempt's claims are stale
    topology = ctx.topology
    created: list[Claim] = []
    seen: set[int] = set()
    failed: set[int] = set()
    planned_in: dict[str, set[int]] = {}  # NodePool -> plans that created a claim in it so far
    for index, placement in enumerate(placements):
        pod = placement.work.pod
        target = placement.target
        planned = targets.get(index)
        if planned is None or planned.plan in failed:
            if isinstance(target, Existing):
                hostname, taints = target.state.hostname, target.taints
            else:
                hostname, taints = target.hostname, target.template.taints
                if id(target) not in seen:
                    seen.add(id(target))
                    created.append(target)
                    if not _within_limits(ctx, target):
                        # the plans before it left this first-fit claim no room
                        failed |= planned_in.get(target.template.nodepool.name, set())
                    ctx.limits.commit(target)  # counted at its final types, as first fit left it
            topology.record(
                pod, placement.requirements, hostname, taints, placement.groups.inverse_owned
            )
            continue
        claim = _claim(ctx, planned, created)
        if claim is not None:
            planned_in.setdefault(planned.template.nodepool.name, set()).add(planned.plan)
        outcome = (
            try_claim(claim, placement.work, placement.groups, placement.volumes, topology)
            if claim is not None
            else None
        )
        if claim is None or isinstance(outcome, Reject) or outcome is None:
            failed.add(planned.plan)
            continue
        _commit(ctx, claim, outcome, placement)
    return failed


def _within_limits(ctx: PassContext, claim: Claim) -> bool:
    """Whether the NodePool's limits, as the replay has counted them so far, still allow every
    type ``claim`` may become (what the scheduler checked when it created the claim)."""
    allowed = ctx.limits.mask(claim.template)
    return allowed == -1 or claim.mask & ~allowed == 0


def _claim(ctx: PassContext, planned: Planned, created: list[Claim]) -> Claim | None:
    """The planned claim, created on first use within the NodePool's limits (None: refused)."""
    if planned.claim is None:
        mask = planned.mask & ctx.limits.mask(planned.template)
        if not mask:
            return None
        planned.claim = Claim(planned.template, planned.hostname, planned.requirements, mask)
        created.append(planned.claim)
        ctx.limits.commit(planned.claim)
    return planned.claim


def _commit(ctx: PassContext, claim: Claim, fit: ClaimFit, placement: Placement) -> None:
    """What ``Scheduler._commit_claim`` does, for a pass without reservations."""
    claim.requirements = fit.requirements
    claim.requests = fit.requests
    claim.mask = fit.mask
    claim.min_values_relaxed = fit.min_values_relaxed
    ctx.limits.commit(claim)  # its types narrowed: the pool's usage follows, as the scheduler's
    pod = placement.work.pod
    claim.pods.append(pod)
    claim.host_ports.extend(pod.host_ports)
    # Counted with the requirements the first pass counted it with, on the new hostname: a pod
    # that first landed on a claim whose zone was still open counted in no zone then, and the
    # class's zone, already on this claim, must not count it now (zone counts stay the first
    # pass's, so zone spreads and affinities see what they saw then).
    ctx.topology.record(
        pod,
        placement.requirements,
        claim.hostname,
        claim.template.taints,
        placement.groups.inverse_owned,
    )


def launch_price(claim: Claim) -> float | None:
    """The hourly price the claim would launch at: its cheapest type's cheapest offering."""
    for index, offer in claim.template.catalog.priced(claim.requirements).order:
        if claim.mask >> index & 1:
            return offer.price
    return None


def acceptable(ctx: PassContext, before: Sequence[Claim], after: Iterable[Planned]) -> bool:
    """Whether the replayed claims all finalize and cost less than the first pass's."""
    new: dict[int, Claim] = {}
    for planned in after:
        if planned.claim is None:
            return False
        new[id(planned.claim)] = planned.claim
    old_price = sum(launch_price(c) or 0.0 for c in before)
    new_price = 0.0
    for claim in new.values():
        price = launch_price(claim)
        if price is None or isinstance(finalize_claim(ctx, claim), str):
            return False
        new_price += price
    return new_price < old_price - 1e-9
