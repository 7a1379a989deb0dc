"""Consolidation's decision for a set of candidates: delete them, replace them, or leave them.

After simulating the candidates' removal (``simulation.reschedule``):
- a pod that cannot be placed, or a pod that would land on an uninitialized node: no command;
- no new NodeClaim: delete;
- more than one new NodeClaim: no command from this rule (upstream never replaces one node
  with many; ``split`` may, with ``Options.max_replacements`` > 1, when one replacement
  cannot do it);
- exactly one: replace, keeping only the instance types whose worst-case launch price (the
  most expensive compatible offering of the capacity type that would be bought: reserved, else
  spot, else on-demand) is strictly below the candidates' total price. A replacement that could
  be spot or on-demand is pinned to spot, so a spot shortage fails the launch instead of
  buying dearer on-demand. When every candidate is spot and the replacement may be spot, the
  spot-to-spot rules apply: the ``SpotToSpotConsolidation`` gate, and for a single node at least
  15 cheaper types (then the 15 cheapest are kept) so the replacement is not the next node to be
  interrupted.
Multi-node replacements also drop every option not strictly cheaper than a candidate's own type
when that type is among the options (else deleting fewer nodes would do; nothing left: the
command is abandoned and smaller ones are tried). As upstream, the options compared are those
before the spot pin, which only adds a requirement: an on-demand-only type equal to a
candidate's still sets the ceiling, then prices are read under the pinned requirements.
Pools with the ``Balanced`` policy approve a command only when its savings share is at least
half its disruption share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from karpenter.core.disruption.candidates import Candidate, state_price
from karpenter.core.disruption.commands import METHOD_MULTI, Command, NoOp
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.disruption.simulation import (
    Outcome,
    homeless_message,
    reschedule_kept,
    stranded,
    stranded_message,
)
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.nodepool import BALANCED, REASON_UNDERUTILIZED
from karpenter.core.provisioning.results import Launch, NewNodeClaim, min_values_met
from karpenter.core.scheduling.requirements import Requirement, Requirements

MIN_SPOT_TO_SPOT_TYPES = 15
# The NoOp kind of a command refused because the kube-scheduler would strand its pods.
STRANDS = "Strands"
BALANCED_K = 2.0
_LAUNCH_ORDER = (lbl.CAPACITY_TYPE_RESERVED, lbl.CAPACITY_TYPE_SPOT, lbl.CAPACITY_TYPE_ON_DEMAND)


def _compatible(it: InstanceType, reqs: Requirements, id_label: str = "") -> list[Offering]:
    zone = reqs.get_or_exists(lbl.ZONE)
    ctype = reqs.get_or_exists(lbl.CAPACITY_TYPE)
    # a reserved claim may only launch into the reservations it holds
    rid = reqs.get_or_exists(id_label) if id_label else None
    return [
        o
        for o in it.offerings
        if o.available
        and zone.has(o.zone)
        and ctype.has(o.capacity_type)
        and (rid is None or not o.reservation_id or rid.has(o.reservation_id))
    ]


def worst_launch_price(it: InstanceType, reqs: Requirements) -> float | None:
    """The dearest offering of the capacity type a launch would use (None: cannot launch)."""
    offerings = _compatible(it, reqs)
    for ctype in _LAUNCH_ORDER:
        prices = [o.price for o in offerings if o.capacity_type == ctype]
        if prices:
            return max(prices)
    return None


def _cheapest(it: InstanceType, reqs: Requirements, id_label: str) -> Offering | None:
    offerings = _compatible(it, reqs, id_label)
    return min(offerings, key=lambda o: o.price) if offerings else None


def _with_capacity_types(reqs: Requirements, ctypes: frozenset[str]) -> Requirements:
    return reqs.intersect(Requirements((Requirement(lbl.CAPACITY_TYPE, False, ctypes),)))


def rebuild(
    ps: DisruptionPass,
    claim: NewNodeClaim,
    types: Sequence[InstanceType],
    capacity_types: frozenset[str] | None = None,
) -> NewNodeClaim | str:
    """The claim narrowed to ``types`` (and capacity types), relaunched on the cheapest."""
    reqs = claim.requirements
    if capacity_types is not None:
        reqs = _with_capacity_types(reqs, capacity_types)
    id_label = ps.options.reservation_id_label
    priced: list[tuple[Offering, InstanceType]] = []
    for it in types:
        offer = _cheapest(it, reqs, id_label)
        if offer is not None:
            priced.append((offer, it))
    if not priced:
        return "no remaining instance type has an available offering"
    priced.sort(key=lambda pair: pair[0].price)
    kept = [it for _, it in priced]
    failures = min_values_met(claim.requirements, kept)
    if failures and ps.options.min_values_policy == "Strict":
        return "; ".join(failures)
    ctypes = frozenset(o.capacity_type for it in kept for o in _compatible(it, reqs, id_label))
    reqs = reqs.intersect(
        Requirements(
            (
                Requirement(lbl.INSTANCE_TYPE, False, frozenset(it.name for it in kept)),
                Requirement(lbl.CAPACITY_TYPE, False, ctypes),
            )
        )
    )
    offer, launched = priced[0]
    return replace(
        claim,
        requirements=reqs,
        instance_types=tuple(kept),
        launch=Launch(
            launched.name, offer.zone, offer.capacity_type, offer.price, offer.reservation_id
        ),
        labels=_labels(ps, claim, launched, offer),
        min_values_relaxed=claim.min_values_relaxed or bool(failures),
    )


def _labels(
    ps: DisruptionPass, claim: NewNodeClaim, launched: InstanceType, offer: Offering
) -> dict[str, str]:
    """The replacement's node labels: the old launch's type labels swapped for the new one's."""
    labels = dict(claim.labels)
    old = next((it for it in claim.instance_types if it.name == claim.launch.instance_type), None)
    if old is not None:
        for key, value in old.requirements.single_values().items():
            if labels.get(key) == value:
                del labels[key]
    labels.update(launched.requirements.single_values())
    pool = ps.pools.get(claim.nodepool)
    if pool is not None:
        labels.update(pool.template.labels)
    labels[lbl.INSTANCE_TYPE] = launched.name
    labels[lbl.ZONE] = offer.zone
    labels[lbl.CAPACITY_TYPE] = offer.capacity_type
    id_label = ps.options.reservation_id_label
    if offer.reservation_id and id_label:
        labels[id_label] = offer.reservation_id
    elif not offer.reservation_id:
        for key in ps.options.reservation_labels:
            labels.pop(key, None)  # a type's single reservation is not this node's
    return dict(sorted(labels.items()))


def _cheaper(
    ps: DisruptionPass, types: Sequence[InstanceType], reqs: Requirements, limit: float
) -> list[InstanceType]:
    # Memoized per pass: the same types are priced for every candidate's replacement. The
    # types live in the pass's snapshot, so their identities are stable while it runs.
    memo = ps.worst_prices.setdefault(
        (reqs.get_or_exists(lbl.ZONE), reqs.get_or_exists(lbl.CAPACITY_TYPE)), {}
    )
    out = []
    for it in types:
        key = id(it)
        if key in memo:
            worst = memo[key]
        else:
            worst = memo[key] = worst_launch_price(it, reqs)
        if worst is not None and worst < limit:
            out.append(it)
    return out


def _spot_to_spot(
    ps: DisruptionPass, claim: NewNodeClaim, candidates: Sequence[Candidate], single: bool
) -> NewNodeClaim | NoOp:
    if not ps.options.spot_to_spot_consolidation:
        return NoOp(
            "SpotToSpotDisabled",
            "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node",
        )
    spot = frozenset((lbl.CAPACITY_TYPE_SPOT,))
    reqs = _with_capacity_types(claim.requirements, spot)
    price = sum(c.price for c in candidates)
    cheaper = _cheaper(ps, claim.instance_types, reqs, price)
    if not cheaper:
        return NoOp("NotCheaper", "can't replace with a cheaper node")
    if single:
        if len(cheaper) < MIN_SPOT_TO_SPOT_TYPES:
            return NoOp(
                "SpotToSpotTooFewTypes",
                f"SpotToSpotConsolidation requires {MIN_SPOT_TO_SPOT_TYPES} cheaper instance type"
                f" options than the current candidate to consolidate, got {len(cheaper)}",
            )
        cheaper.sort(key=lambda it: worst_launch_price(it, reqs) or 0.0)
        keep = MIN_SPOT_TO_SPOT_TYPES
        # Keep more than 15 only when minValues needs them.
        while keep < len(cheaper) and min_values_met(claim.requirements, cheaper[:keep]):
            keep += 1
        cheaper = cheaper[:keep]
    built = rebuild(ps, claim, cheaper, spot)
    return NoOp("NotCheaper", built) if isinstance(built, str) else built


def _replacement(
    ps: DisruptionPass, claim: NewNodeClaim, candidates: Sequence[Candidate], multi: bool
) -> NewNodeClaim | NoOp:
    """The one replacement, priced against the candidates (``multi``: multi-node rules too)."""
    ctype = claim.requirements.get_or_exists(lbl.CAPACITY_TYPE)
    if all(c.capacity_type == lbl.CAPACITY_TYPE_SPOT for c in candidates) and ctype.has(
        lbl.CAPACITY_TYPE_SPOT
    ):
        # Spot-to-spot keeps only spot-compatible options first, so the same-type rule sees
        # those (as upstream).
        spot = _spot_to_spot(ps, claim, candidates, len(candidates) == 1)
        if multi and isinstance(spot, NewNodeClaim):
            return _without_same_types(ps, spot, spot.instance_types, candidates, None)
        return spot
    price = sum(c.price for c in candidates)
    cheaper = _cheaper(ps, claim.instance_types, claim.requirements, price)
    if not cheaper:
        return NoOp("NotCheaper", "can't replace with a cheaper node")
    pin: frozenset[str] | None = None
    if ctype.has(lbl.CAPACITY_TYPE_SPOT) and ctype.has(lbl.CAPACITY_TYPE_ON_DEMAND):
        pin = frozenset((lbl.CAPACITY_TYPE_SPOT,))
    if multi:
        return _without_same_types(ps, claim, cheaper, candidates, pin)
    built = rebuild(ps, claim, cheaper, pin)
    return NoOp("NotCheaper", built) if isinstance(built, str) else built


def _without_same_types(
    ps: DisruptionPass,
    claim: NewNodeClaim,
    options: Sequence[InstanceType],
    candidates: Sequence[Candidate],
    pin: frozenset[str] | None,
) -> NewNodeClaim | NoOp:
    """``claim`` rebuilt on the options strictly cheaper than any candidate's own type among
    them (under the pinned capacity types), or why none is left."""
    names = {it.name for it in options}
    ceiling = math.inf
    for c in candidates:
        if c.instance_type is not None and c.instance_type.name in names and c.price > 0:
            ceiling = min(ceiling, c.price)
    reqs = claim.requirements if pin is None else _with_capacity_types(claim.requirements, pin)
    kept = list(options) if math.isinf(ceiling) else _cheaper(ps, options, reqs, ceiling)
    if not kept:
        return NoOp("SameType", "replacement would be a candidate's own instance type")
    built = rebuild(ps, claim, kept, pin)
    if isinstance(built, str):
        return NoOp("SameType" if not math.isinf(ceiling) else "NotCheaper", built)
    return built


def balanced_rejection(ps: DisruptionPass, command: Command) -> str:
    """Why a Balanced pool vetoes ``command`` ("" when every Balanced pool approves)."""
    total = command.price_removed
    for pool_name in sorted({c.nodepool.name for c in command.candidates}):
        pool = ps.pools[pool_name]
        if pool.disruption.consolidation_policy != BALANCED:
            continue
        mine = [c for c in command.candidates if c.nodepool.name == pool_name]
        share = (
            sum(c.price for c in mine) / total
            if total > 0
            else 1.0 / len({c.nodepool.name for c in command.candidates})
        )
        savings = command.savings * share
        pool_cost, pool_disruption = ps.pool_totals(pool_name)
        move = sum(c.reschedule_cost for c in mine)
        if savings <= 0 or pool_cost <= 0 or pool_disruption <= 0:
            return f"Balanced: NodePool {pool_name} sees no savings"
        score = (savings / pool_cost) / (move / pool_disruption)
        if score < 1.0 / BALANCED_K:
            return (
                f"Balanced: NodePool {pool_name} score {score:.3f} is below"
                f" {1.0 / BALANCED_K:.3f} (savings {savings / pool_cost:.1%},"
                f" disruption {move / pool_disruption:.1%})"
            )
    return ""


_SPLITTABLE = frozenset({"TooManyReplacements", "NotCheaper", "SameType"})


def consolidate(ps: DisruptionPass, candidates: Sequence[Candidate], method: str) -> Command | NoOp:
    """The consolidation command for exactly these candidates, or why there is none.

    When one replacement cannot do it, several cheaper ones may (``split``)."""
    outcome, repacked = reschedule_kept(ps.cluster, candidates, ps.states, ps.options, ps.reuse)
    verdict = _verdict(ps, candidates, method, outcome)
    if isinstance(verdict, NoOp) and verdict.kind in _SPLITTABLE and outcome.claims:
        from karpenter.core.disruption import split  # noqa: PLC0415 - split imports this module

        needed = res.add(*(c.requests for c in outcome.claims))
        one_node = sum(c.launch.price for c in outcome.claims) if len(outcome.claims) == 1 else None
        held = split.replaced(candidates, outcome)
        if split.worth_trying(ps, candidates, needed, one_node, held):
            attempt = split.consolidate_split(ps, candidates, method, outcome, repacked)
            if isinstance(attempt, Command):
                verdict = attempt
    if isinstance(verdict, NoOp):
        return verdict
    rejection = balanced_rejection(ps, verdict)
    if rejection:
        return NoOp("Balanced", rejection)
    return strands(ps, verdict) or verdict


def strands(ps: DisruptionPass, command: Command) -> NoOp | None:
    """A ``Strands`` refusal when the kube-scheduler would leave some of ``command``'s evicted
    pods without a node and the NodeClaims the provisioner would then buy for them cost at
    least what the command saves (``simulation.stranded``; ``Options.stranding_check``), else
    None.

    The plan packs the evicted pods first fit, largest first; the scheduler binds them one by
    one as they arrive, each to the least-allocated node that fits. Where the plan's room is
    tight, small pods arriving first take a piece of every node and a large one is left
    pending: the provisioner buys a node for it, and the next round removes that node again
    (upstream's wide scale-down on kwok bought 47 NodeClaims in nine minutes this way). A
    command that saves more than that node costs still makes the fleet cheaper, so it goes
    ahead."""
    if not ps.options.stranding_check:
        return None
    cluster, candidates, replacements = ps.cluster, command.candidates, command.replacements
    bound = stranded(cluster, candidates, ps.states, ps.options, ps.reuse, replacements, ps.now)
    if not bound.stranded:
        return None
    if not bound.homeless and command.savings - bound.price > 0:
        return None
    return NoOp(STRANDS, stranded_message(bound, command.savings))


def _verdict(
    ps: DisruptionPass, candidates: Sequence[Candidate], method: str, outcome: Outcome
) -> Command | NoOp:
    if outcome.failures:
        return NoOp("Unschedulable", outcome.failure_message())
    if outcome.homeless:
        return NoOp("BufferUnschedulable", homeless_message(outcome))
    if outcome.uninitialized:
        return NoOp(
            "Uninitialized", f"pods would schedule on uninitialized node {outcome.uninitialized[0]}"
        )
    command = Command(REASON_UNDERUTILIZED, method, tuple(candidates), (), outcome.moves)
    if len(outcome.claims) > 1:
        return NoOp(
            "TooManyReplacements",
            f"can't remove without creating {len(outcome.claims)} candidates",
        )
    if outcome.claims:
        built = _replacement(ps, outcome.claims[0], candidates, method == METHOD_MULTI)
        if isinstance(built, NoOp):
            return built
        command = replace(command, replacements=(built,))
    return command


def pool_price(ps: DisruptionPass, pool_name: str) -> float:
    """Hourly price of a pool's nodes (for Balanced scoring)."""
    types = ps.types_by_pool.get(pool_name, {})
    return sum(state_price(s, types) for s in ps.states if s.nodepool == pool_name)
