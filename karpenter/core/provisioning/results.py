"""The outcome of a pass: NodeClaims to create, pods for existing nodes, and pods left over.

Finalizing a NodeClaim orders its instance types by the cheapest offering its requirements
allow, truncates to the 600 cheapest (minValues still honoured, else the claim is dropped and
its pods fail), narrows the capacity type to what those types offer, adds the smallest daemon
overhead still possible to its requests, and picks the launch: the cheapest available offering
(ties: reserved before spot before on-demand, then the catalog's order). With the mixing
hedge (``mixing``, provisioning passes only) a claim's types are first narrowed to those that
hold the mix of pods the kube-scheduler may bind there.

A claim holding capacity reservations launches only into them: its capacity type becomes
``reserved``, the provider's reservation-id label is narrowed to the ids it holds, and its
types are those reservations' types. A claim holding none never launches reserved (reserved
offerings it did not reserve belong to other claims).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import PLACEHOLDER_KEYS, PassContext
from karpenter.core.provisioning.mixing import Mixer
from karpenter.core.provisioning.targets import Claim
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.core.scheduling.taints import Taint


@dataclass(frozen=True, slots=True)
class Launch:
    """What the cloud would start for a NodeClaim."""

    instance_type: str
    zone: str
    capacity_type: str
    price: float
    reservation_id: str = ""


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
    # the type the plan would have launched, when the mixing hedge narrowed the claim
    # (core.provisioning.mixing); empty otherwise
    hedged_from: str = ""


@dataclass(frozen=True, slots=True)
class Results:
    """A pass's decisions (pods are referenced by value; reasons by ``namespace/name``)."""

    new_claims: tuple[NewNodeClaim, ...] = ()
    existing: tuple[tuple[str, tuple[Pod, ...]], ...] = ()
    unschedulable: Mapping[str, str] = field(default_factory=dict)
    skipped_pools: Mapping[str, str] = field(default_factory=dict)
    # keys of unschedulable pods that only wait for reserved capacity (not failures)
    deferred: frozenset[str] = frozenset()
    # a price no valid set of new claims for the same pods undercuts (None: not computed)
    lower_bound: float | None = None
    # work units the cost pass spent (``work.Budget``; 0 when it did not run)
    cost_work: int = 0

    @property
    def price(self) -> float:
        """Hourly price of the NodeClaims to launch."""
        return sum(c.launch.price for c in self.new_claims)


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


def _truncate(
    claim: Claim, order: Sequence[tuple[int, Offering]], limit: int
) -> list[tuple[int, Offering]]:
    """The claim's types in ``order`` (each once), at most ``limit`` of them."""
    out: list[tuple[int, Offering]] = []
    seen: set[int] = set()
    for index, offer in order:
        if claim.mask >> index & 1 and index not in seen:
            seen.add(index)
            out.append((index, offer))
            if len(out) == limit:
                break
    return out


_Options = tuple[list[tuple[int, Offering]], list[Requirement]]


def _reserved_options(ctx: PassContext, claim: Claim) -> _Options:
    """A reserved claim's launch options (its reservations), cheapest first, and the
    requirements that pin them."""
    catalog = claim.template.catalog
    zone = claim.requirements.get_or_exists(lbl.ZONE)
    held = sorted(
        (
            (index, o)
            for index, o in catalog.reserved
            if o.reservation_id in claim.reserved and zone.has(o.zone)
        ),
        key=lambda pair: (pair[1].price, pair[0], pair[1].reservation_id),
    )
    pins = [Requirement(lbl.CAPACITY_TYPE, False, frozenset((lbl.CAPACITY_TYPE_RESERVED,)))]
    if ctx.options.reservation_id_label:
        pins.append(Requirement(ctx.options.reservation_id_label, False, claim.reserved))
    return _truncate(claim, held, ctx.options.max_instance_types), pins


_NOT_RESERVED = Requirement(lbl.CAPACITY_TYPE, True, frozenset((lbl.CAPACITY_TYPE_RESERVED,)))

# A claim's launch options: (truncated, their types, the requirements that pin them).
_Choice = tuple[list[tuple[int, Offering]], tuple[InstanceType, ...], Requirements]
# Per pass: claims alike in pool, zone, capacity type, types and reservations launch alike.
ChoiceMemo = dict[tuple[object, ...], _Choice]


def _choice(ctx: PassContext, claim: Claim, memo: ChoiceMemo | None) -> _Choice:
    """The claim's launch options, cheapest first, the types they keep and the requirements
    that pin them, shared by claims that would compute the same."""
    reqs = claim.requirements
    key = (
        claim.template.index,
        reqs.get(lbl.ZONE),
        reqs.get(lbl.CAPACITY_TYPE),
        claim.mask,
        claim.reserved,
    )
    found = memo.get(key) if memo is not None else None
    if found is None:
        catalog = claim.template.catalog
        if claim.reserved:
            truncated, pins = _reserved_options(ctx, claim)
            kept = tuple(catalog.types[i] for i, _ in truncated)
            names = Requirement(lbl.INSTANCE_TYPE, False, frozenset(it.name for it in kept))
            found = (truncated, kept, Requirements((names, *pins)))
        else:
            if catalog.reserved:
                reqs = reqs.intersect(Requirements((_NOT_RESERVED,)))
            # the types and pins depend on the catalog alone: it keeps them for every pass
            cheapest = catalog.cheapest(reqs, claim.mask, ctx.options.max_instance_types)
            found = (list(cheapest.order), cheapest.types, cheapest.pinned)
        if memo is not None:
            memo[key] = found
    return found


def _launch(offer: Offering, launched: InstanceType) -> Launch:
    return Launch(launched.name, offer.zone, offer.capacity_type, offer.price, offer.reservation_id)


def _hedged(
    claim: Claim,
    choice: _Choice,
    labels: Mapping[str, str],
    overhead: Mapping[str, int],
    mixer: Mixer,
) -> tuple[_Choice, str] | None:
    """``choice`` narrowed by the mixing hedge and the type it replaced (``labels``: the
    planned launch's node labels); None when the plan stands."""
    truncated, kept, pinned = choice
    t = claim.template
    if claim.reserved or any(r.min_values for r in claim.requirements.values()):
        return None
    hedge = mixer.hedge(truncated, kept, labels, t.tolerated, t.index, len(claim.pods), overhead)
    if hedge is None:
        return None
    types = tuple(t.catalog.types[i] for i, _ in hedge.options)
    names = Requirement(lbl.INSTANCE_TYPE, False, frozenset(it.name for it in types))
    return (hedge.options, types, pinned.intersect(Requirements((names,)))), hedge.planned


def _labels(claim: Claim, launched: InstanceType, launch: Launch) -> dict[str, str]:
    pool = claim.template.nodepool
    labels = node_labels(claim.requirements, launched, launch, pool.template.labels)
    labels[lbl.NODEPOOL] = pool.name
    return labels


def finalize_claim(
    ctx: PassContext, claim: Claim, memo: ChoiceMemo | None = None, mixer: Mixer | None = None
) -> NewNodeClaim | str:
    """Turn a claim into a NewNodeClaim, or say why it cannot be launched (``mixer``: hedge
    its launch against the kube-scheduler's mixing of the pass's pods)."""
    t = claim.template
    truncated, kept, pinned = _choice(ctx, claim, memo)
    failures = min_values_met(claim.requirements, kept)
    if failures and t.strict_min_values:
        return "; ".join(failures) + " after truncating to the cheapest instance types"
    if not truncated:
        return "no instance type has an available offering"
    overhead = res.minimum(g.overhead for g in t.daemon_groups if g.mask & claim.mask)
    launch = _launch(truncated[0][1], kept[0])
    labels = _labels(claim, kept[0], launch)
    hedged_from = ""
    hedged = None
    if mixer is not None and not failures:
        hedged = _hedged(claim, (truncated, kept, pinned), labels, overhead, mixer)
    if hedged is not None:
        (truncated, kept, pinned), hedged_from = hedged
        launch = _launch(truncated[0][1], kept[0])
        labels = _labels(claim, kept[0], launch)
    reqs = claim.requirements.without(PLACEHOLDER_KEYS | {lbl.HOSTNAME}).intersect(pinned)
    pool = t.nodepool
    if launch.reservation_id and ctx.options.reservation_id_label:
        labels[ctx.options.reservation_id_label] = launch.reservation_id
    elif not launch.reservation_id:
        # a type's single reservation shows up among its single values; not this node's
        for key in ctx.options.reservation_labels:
            labels.pop(key, None)
    return NewNodeClaim(
        pool.name,
        claim.hostname,
        reqs,
        kept,
        launch,
        dict(sorted(labels.items())),
        pool.template.taints,
        pool.template.startup_taints,
        tuple(claim.pods),
        res.add(claim.requests, overhead),
        claim.min_values_relaxed or bool(failures),
        hedged_from,
    )


def finalize(
    ctx: PassContext,
    claims: Sequence[Claim],
    reasons: Mapping[str, str],
    deferred: frozenset[str] = frozenset(),
    hedge: frozenset[str] | None = None,
) -> Results:
    """Build the Results of a pass (``deferred``: pods waiting for reserved capacity;
    ``hedge``: hedge the launches against the kube-scheduler's mixing of the pass's placed
    pods, these pods' keys (virtual ones) left out of the mix; None: no hedge)."""
    unschedulable = dict(reasons)
    new_claims = []
    memo: ChoiceMemo = {}
    mixer = None
    if hedge is not None:
        mixed = [p for c in claims for p in c.pods]
        mixed += [p for i in sorted(ctx.touched) for p in ctx.existing[i].pods]
        mixer = Mixer(p for p in mixed if p.key not in hedge)
    for claim in claims:
        outcome = finalize_claim(ctx, claim, memo, mixer)
        if isinstance(outcome, str):
            for pod in claim.pods:
                unschedulable[pod.key] = outcome
            continue
        new_claims.append(outcome)
    placed = (ctx.existing[i] for i in sorted(ctx.touched))
    existing = tuple((e.state.name, tuple(e.pods)) for e in placed if e.pods)
    return Results(
        tuple(new_claims),
        existing,
        unschedulable,
        dict(ctx.skipped_pools),
        deferred & frozenset(unschedulable),
    )
