"""The outcome of a pass: NodeClaims to create, pods for existing nodes, and pods left over.

Finalizing a NodeClaim orders its instance types by the cheapest offering its requirements
allow, truncates to the 600 cheapest (minValues still honoured, else the claim is dropped and
its pods fail), narrows the capacity type to what those types offer, adds the smallest daemon
overhead still possible to its requests, and picks the launch: the cheapest available offering
(ties: reserved before spot before on-demand, then the catalog's order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import PLACEHOLDER_KEYS, PassContext
from karpenter.core.provisioning.targets import Claim
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.core.scheduling.taints import Taint

_CAPACITY_PRIORITY = {lbl.CAPACITY_TYPE_RESERVED: 0, lbl.CAPACITY_TYPE_SPOT: 1}


@dataclass(frozen=True, slots=True)
class Launch:
    """What the cloud would start for a NodeClaim."""

    instance_type: str
    zone: str
    capacity_type: str
    price: float


@dataclass(frozen=True, slots=True)
class NewNodeClaim:
    """A NodeClaim the pass decided to create."""

    nodepool: str
    hostname: str
    requirements: Requirements
    instance_types: tuple[InstanceType, ...]
    launch: Launch
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    pods: tuple[Pod, ...]
    requests: Mapping[str, int]
    min_values_relaxed: bool = False


@dataclass(frozen=True, slots=True)
class Results:
    """A pass's decisions (pods are referenced by value; reasons by ``namespace/name``)."""

    new_claims: tuple[NewNodeClaim, ...] = ()
    existing: tuple[tuple[str, tuple[Pod, ...]], ...] = ()
    unschedulable: Mapping[str, str] = field(default_factory=dict)
    skipped_pools: Mapping[str, str] = field(default_factory=dict)

    @property
    def price(self) -> float:
        """Hourly price of the NodeClaims to launch."""
        return sum(c.launch.price for c in self.new_claims)


def cheapest_offering(it: InstanceType, reqs: Requirements) -> Offering | None:
    """The cheapest available offering of ``it`` in a zone / capacity type ``reqs`` allow."""
    zone = reqs.get_or_exists(lbl.ZONE)
    ctype = reqs.get_or_exists(lbl.CAPACITY_TYPE)
    best: Offering | None = None
    for o in it.offerings:
        if not (o.available and zone.has(o.zone) and ctype.has(o.capacity_type)):
            continue
        if best is None or _offer_key(o) < _offer_key(best):
            best = o
    return best


def _offer_key(o: Offering) -> tuple[float, int]:
    return (o.price, _CAPACITY_PRIORITY.get(o.capacity_type, 2))


def order_by_price(
    types: Sequence[InstanceType], reqs: Requirements
) -> list[tuple[InstanceType, Offering]]:
    """Types with a usable offering, cheapest first (ties keep catalog order)."""
    priced = []
    for index, it in enumerate(types):
        offer = cheapest_offering(it, reqs)
        if offer is not None:
            priced.append(
                (offer.price, _CAPACITY_PRIORITY.get(offer.capacity_type, 2), index, it, offer)
            )
    priced.sort(key=lambda p: p[:3])
    return [(p[3], p[4]) for p in priced]


def min_values_met(reqs: Requirements, types: Sequence[InstanceType]) -> list[str]:
    """minValues keys that ``types`` cannot satisfy (with counts), for reasons."""
    failures = []
    for req in reqs.values():
        if not req.min_values:
            continue
        seen: set[str] = set()
        for it in types:
            mine = it.requirements.get(req.key)
            if req.key == lbl.INSTANCE_TYPE:
                seen.add(it.name)
            elif mine is not None and not mine.complement:
                seen |= mine.values & (req.values if not req.complement else mine.values)
        if len(seen) < req.min_values:
            failures.append(f"minValues {req.min_values} of {req.key} (only {len(seen)})")
    return failures


def node_labels(
    claim_reqs: Requirements, launched: InstanceType, launch: Launch, pool_labels: Mapping[str, str]
) -> dict[str, str]:
    """The labels the launched node carries (hostname excluded: it is the claim's name)."""
    labels: dict[str, str] = {}
    skip = PLACEHOLDER_KEYS | {lbl.HOSTNAME}
    for key, req in claim_reqs.items():
        if key in skip:
            continue
        if not req.complement and len(req.values) == 1:
            labels[key] = next(iter(req.values))
        elif key not in lbl.WELL_KNOWN_LABELS and key not in launched.requirements:
            value = req.any_value()
            if value:
                labels[key] = value
    labels.update(launched.requirements.single_values())
    labels.update(pool_labels)
    labels[lbl.INSTANCE_TYPE] = launched.name
    labels[lbl.ZONE] = launch.zone
    labels[lbl.CAPACITY_TYPE] = launch.capacity_type
    return dict(sorted(labels.items()))


def finalize_claim(ctx: PassContext, claim: Claim) -> NewNodeClaim | str:
    """Turn a claim into a NewNodeClaim, or say why it cannot be launched."""
    t = claim.template
    catalog = t.catalog
    types = [catalog.types[i] for i in catalog.indices(claim.mask)]
    ordered = order_by_price(types, claim.requirements)
    truncated = ordered[: ctx.options.max_instance_types]
    kept = [it for it, _ in truncated]
    failures = min_values_met(claim.requirements, kept)
    if failures and t.strict_min_values:
        return "; ".join(failures) + " after truncating to the cheapest instance types"
    if not truncated:
        return "no instance type has an available offering"
    launched, offer = truncated[0]
    launch = Launch(launched.name, offer.zone, offer.capacity_type, offer.price)
    ctypes = {
        o.capacity_type
        for it in kept
        for o in it.offerings
        if o.available
        and claim.requirements.get_or_exists(lbl.ZONE).has(o.zone)
        and claim.requirements.get_or_exists(lbl.CAPACITY_TYPE).has(o.capacity_type)
    }
    reqs = claim.requirements.without(PLACEHOLDER_KEYS | {lbl.HOSTNAME}).intersect(
        Requirements(
            (
                Requirement(lbl.INSTANCE_TYPE, False, frozenset(it.name for it in kept)),
                Requirement(lbl.CAPACITY_TYPE, False, frozenset(ctypes)),
            )
        )
    )
    overhead = res.minimum(g.overhead for g in t.daemon_groups if g.mask & claim.mask)
    pool = t.nodepool
    labels = node_labels(claim.requirements, launched, launch, pool.template.labels)
    labels[lbl.NODEPOOL] = pool.name
    return NewNodeClaim(
        pool.name,
        claim.hostname,
        reqs,
        tuple(kept),
        launch,
        dict(sorted(labels.items())),
        pool.template.taints,
        pool.template.startup_taints,
        tuple(claim.pods),
        res.add(claim.requests, overhead),
        claim.min_values_relaxed or bool(failures),
    )


def finalize(ctx: PassContext, claims: Sequence[Claim], reasons: Mapping[str, str]) -> Results:
    """Build the Results of a pass."""
    unschedulable = dict(reasons)
    new_claims = []
    for claim in claims:
        outcome = finalize_claim(ctx, claim)
        if isinstance(outcome, str):
            for pod in claim.pods:
                unschedulable[pod.key] = outcome
            continue
        new_claims.append(outcome)
    existing = tuple((e.state.name, tuple(e.pods)) for e in ctx.existing if e.pods)
    return Results(tuple(new_claims), existing, unschedulable, dict(ctx.skipped_pools))
