"""Launch planning: from a NodeClaim and the catalogue to CreateFleet overrides.

Upstream's order: keep the types compatible with the claim (requirements, resources, an
available offering), prefer spot when the claim allows it and spot is on offer, drop exotic
types (metal, GPUs) unless nothing else is left, keep the 60 cheapest, then one override per
(type, zone) with the zone's subnet of most free IPs and the AMI that serves the type.
Overrides are ordered cheapest first, as their ``Priority`` says.

Capacity type priority is reserved, then spot, then on-demand. A reserved launch narrows
first: to one reservation type (the cheapest; default ODCRs win ties over capacity blocks),
for capacity blocks to the single cheapest block, else per zone to the reservation with the
most room left; each override then names its reservation, which gets a launch template of
its own. Exotic types stay in a reserved launch: the reservation was bought for that type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.node import NodeClaim
from karpenter.core.provisioning import results
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms
from karpenter.providers.aws.core import amis, catalog
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.core.nodeclass import AMI, Subnet

MAX_INSTANCE_TYPES = 60
_ALLOW_UNDEFINED = frozenset(catalog.WELL_KNOWN | lbl.WELL_KNOWN_LABELS)


class NoCapacityError(Exception):
    """No offering can serve the claim; the message says why."""


@dataclass(frozen=True, slots=True)
class Override:
    """One CreateFleet override."""

    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    price: float
    reservation_id: str = ""


@dataclass(frozen=True, slots=True)
class Plan:
    """What to ask CreateFleet for."""

    capacity_type: str
    overrides: tuple[Override, ...]
    instance_types: tuple[str, ...]
    reservation_type: str = ""  # default | capacity-block, for reserved launches

    def reservation_of(self, instance_type: str, zone: str) -> str:
        """The reservation the override for (type, zone) launches into (``""``: none)."""
        return next(
            (
                o.reservation_id
                for o in self.overrides
                if (o.instance_type, o.zone) == (instance_type, zone)
            ),
            "",
        )

    @property
    def fleet_capacity_type(self) -> str:
        """CreateFleet's DefaultTargetCapacityType: capacity blocks have their own."""
        if self.capacity_type != lbl.CAPACITY_TYPE_RESERVED:
            return self.capacity_type
        if self.reservation_type == rsv.TYPE_CAPACITY_BLOCK:
            return rsv.TYPE_CAPACITY_BLOCK
        return lbl.CAPACITY_TYPE_ON_DEMAND

    def images(self) -> tuple[str, ...]:
        """Distinct AMIs, in override order (one launch template each)."""
        return tuple(dict.fromkeys(o.image_id for o in self.overrides))


def _offers(it: InstanceType, reqs: Requirements, capacity_type: str | None) -> list[Offering]:
    zone = reqs.get_or_exists(lbl.ZONE)
    ct = reqs.get_or_exists(lbl.CAPACITY_TYPE)
    rid = reqs.get_or_exists(rsv.ID_LABEL)
    return [
        o
        for o in it.offerings
        if o.available
        and zone.has(o.zone)
        and ct.has(o.capacity_type)
        and (capacity_type is None or o.capacity_type == capacity_type)
        and (not o.reservation_id or rid.has(o.reservation_id))
    ]


def compatible_types(claim: NodeClaim, types: Iterable[InstanceType]) -> list[InstanceType]:
    """Types whose labels, allocatable and offerings can serve the claim."""
    reqs = from_selector_terms(claim.requirements)
    out = []
    for it in types:
        # As upstream: every key the type defines must intersect the claim's; the claim's own
        # custom labels (NodePool template labels) are not the type's business.
        if not reqs.compatible(it.requirements, _ALLOW_UNDEFINED):
            continue
        if not res.fits(claim.requests, it.allocatable):
            continue
        if _offers(it, reqs, None):
            out.append(it)
    return out


def _exotic(it: InstanceType) -> bool:
    size = it.requirements.get_or_exists(awslbl.SIZE)
    gpu = it.requirements.get_or_exists(awslbl.GPU_COUNT)
    acc = it.requirements.get_or_exists(awslbl.ACCELERATOR_COUNT)
    metal = not size.complement and any("metal" in v for v in size.values)
    has_gpu = not gpu.is_empty() and not gpu.complement
    has_accelerator = bool(acc.values) and not acc.complement
    return metal or has_gpu or has_accelerator


def _cheapest(it: InstanceType, reqs: Requirements, capacity_type: str) -> float:
    return min((o.price for o in _offers(it, reqs, capacity_type)), default=float("inf"))


def _spot_cheaper_than_on_demand(
    candidates: list[InstanceType], all_types: list[InstanceType], reqs: Requirements
) -> list[InstanceType]:
    """Upstream: with both capacity types allowed, spot pricier than on-demand is pointless."""
    if any(r.min_values for r in reqs.values()):
        return candidates
    cheapest_od = min(
        (_cheapest(it, reqs, lbl.CAPACITY_TYPE_ON_DEMAND) for it in all_types), default=float("inf")
    )
    kept = [it for it in candidates if _cheapest(it, reqs, lbl.CAPACITY_TYPE_SPOT) <= cheapest_od]
    return kept or candidates


def best_subnets(subnets: Sequence[Subnet]) -> dict[str, Subnet]:
    """Per zone, the subnet with the most free IPs (ties: lower id)."""
    out: dict[str, Subnet] = {}
    for subnet in sorted(subnets, key=lambda s: (-s.available_ips, s.id)):
        out.setdefault(subnet.zone, subnet)
    return out


def plan(
    claim: NodeClaim,
    types: Iterable[InstanceType],
    subnets: Sequence[Subnet],
    images: Sequence[AMI],
    min_values_best_effort: bool = False,
    reservation_types: Mapping[str, str] | None = None,
) -> Plan:
    """The CreateFleet plan for a claim (raises NoCapacityError).

    Truncation to the 60 cheapest types must keep the claim's ``minValues``; when it cannot,
    the launch fails unless ``MIN_VALUES_POLICY=BestEffort``. ``reservation_types`` maps a
    reservation id to its type (default / capacity-block).
    """
    reqs = from_selector_terms(claim.requirements)
    candidates = compatible_types(claim, types)
    types_on_demand = list(candidates)
    if not candidates:
        raise NoCapacityError("all requested instance types were unavailable during launch")
    reserved = [(it, o) for it in candidates for o in _offers(it, reqs, lbl.CAPACITY_TYPE_RESERVED)]
    if reserved:
        return _reserved_plan(reserved, subnets, images, reservation_types or {})
    spot = any(_offers(it, reqs, lbl.CAPACITY_TYPE_SPOT) for it in candidates)
    capacity_type = lbl.CAPACITY_TYPE_SPOT if spot else lbl.CAPACITY_TYPE_ON_DEMAND
    candidates = [it for it in candidates if _offers(it, reqs, capacity_type)]
    if spot and reqs.get_or_exists(lbl.CAPACITY_TYPE).has(lbl.CAPACITY_TYPE_ON_DEMAND):
        candidates = _spot_cheaper_than_on_demand(candidates, types_on_demand, reqs)
    ordinary = [it for it in candidates if not _exotic(it)]
    if ordinary:
        candidates = ordinary
    candidates.sort(key=lambda it: (_cheapest(it, reqs, capacity_type), it.name))
    candidates = candidates[:MAX_INSTANCE_TYPES]
    unmet = results.min_values_met(reqs, candidates)
    if unmet and not min_values_best_effort:
        raise NoCapacityError(f"minValues requirement is not met: {'; '.join(unmet)}")
    pairs = [(it, o) for it in candidates for o in _offers(it, reqs, capacity_type)]
    overrides = _overrides(pairs, subnets, images)
    return Plan(capacity_type, overrides, tuple(it.name for it in candidates))


def _overrides(
    pairs: Iterable[tuple[InstanceType, Offering]],
    subnets: Sequence[Subnet],
    images: Sequence[AMI],
) -> tuple[Override, ...]:
    """One override per offering whose zone has a subnet and whose type an AMI serves."""
    zonal = best_subnets(subnets)
    overrides = []
    for it, o in pairs:
        ami = amis.for_instance_type(images, it)
        subnet = zonal.get(o.zone)
        if ami is not None and subnet is not None:
            overrides.append(
                Override(it.name, o.zone, subnet.id, ami.id, o.price, o.reservation_id)
            )
    if not overrides:
        raise NoCapacityError("no capacity offerings are currently available given the constraints")
    overrides.sort(key=lambda o: (o.price, o.instance_type, o.zone, o.reservation_id))
    return tuple(overrides)


def _narrow_reserved(
    offers: list[tuple[InstanceType, Offering]], kinds: Mapping[str, str]
) -> tuple[list[tuple[InstanceType, Offering]], str]:
    """One reservation type; one capacity block, or per zone the roomiest reservation."""

    def kind(o: Offering) -> str:
        return kinds.get(o.reservation_id, rsv.TYPE_DEFAULT)

    cheapest: dict[str, float] = {}
    for _, o in offers:
        cheapest[kind(o)] = min(cheapest.get(kind(o), o.price), o.price)
    best = min(cheapest, key=lambda k: (cheapest[k], k != rsv.TYPE_DEFAULT, k))
    offers = [(it, o) for it, o in offers if kind(o) == best]
    if best == rsv.TYPE_CAPACITY_BLOCK:
        return [min(offers, key=lambda p: (p[1].price, p[0].name, p[1].reservation_id))], best
    roomiest: dict[str, tuple[InstanceType, Offering]] = {}
    for it, o in sorted(offers, key=lambda p: (-p[1].reservation_capacity, p[1].reservation_id)):
        roomiest.setdefault(o.zone, (it, o))
    return [roomiest[z] for z in sorted(roomiest)], best


def _reserved_plan(
    offers: list[tuple[InstanceType, Offering]],
    subnets: Sequence[Subnet],
    images: Sequence[AMI],
    kinds: Mapping[str, str],
) -> Plan:
    """A launch into the claim's capacity reservations (one override per reservation)."""
    chosen, kind = _narrow_reserved(offers, kinds)
    overrides = _overrides(chosen, subnets, images)
    names = tuple(dict.fromkeys(o.instance_type for o in overrides))
    return Plan(lbl.CAPACITY_TYPE_RESERVED, overrides, names, kind)
