"""Launch planning: from a NodeClaim and the catalogue to CreateFleet overrides.

Upstream's order: keep the types compatible with the claim (requirements, resources, an
available offering), prefer spot when the claim allows it and spot is on offer, drop exotic
types (metal, GPUs) unless nothing else is left, keep the 60 cheapest, then one override per
(type, zone) with the zone's subnet of most free IPs and the AMI that serves the type.
Overrides are ordered cheapest first, as their ``Priority`` says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from karpenter.core.aws import amis, catalog
from karpenter.core.aws import labels as awslbl
from karpenter.core.aws.nodeclass import AMI, Subnet
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.node import NodeClaim
from karpenter.core.provisioning import results
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms

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


@dataclass(frozen=True, slots=True)
class Plan:
    """What to ask CreateFleet for."""

    capacity_type: str
    overrides: tuple[Override, ...]
    instance_types: tuple[str, ...]

    def images(self) -> tuple[str, ...]:
        """Distinct AMIs, in override order (one launch template each)."""
        return tuple(dict.fromkeys(o.image_id for o in self.overrides))


def _offers(it: InstanceType, reqs: Requirements, capacity_type: str | None) -> list[Offering]:
    zone = reqs.get_or_exists(lbl.ZONE)
    ct = reqs.get_or_exists(lbl.CAPACITY_TYPE)
    return [
        o
        for o in it.offerings
        if o.available
        and zone.has(o.zone)
        and ct.has(o.capacity_type)
        and (capacity_type is None or o.capacity_type == capacity_type)
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
) -> Plan:
    """The CreateFleet plan for a claim (raises NoCapacityError).

    Truncation to the 60 cheapest types must keep the claim's ``minValues``; when it cannot,
    the launch fails unless ``MIN_VALUES_POLICY=BestEffort``.
    """
    reqs = from_selector_terms(claim.requirements)
    candidates = compatible_types(claim, types)
    types_on_demand = list(candidates)
    if not candidates:
        raise NoCapacityError("all requested instance types were unavailable during launch")
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
    zonal = best_subnets(subnets)
    overrides = []
    for it in candidates:
        ami = amis.for_instance_type(images, it)
        if ami is None:
            continue
        for offer in _offers(it, reqs, capacity_type):
            subnet = zonal.get(offer.zone)
            if subnet is not None:
                overrides.append(Override(it.name, offer.zone, subnet.id, ami.id, offer.price))
    if not overrides:
        raise NoCapacityError("no capacity offerings are currently available given the constraints")
    overrides.sort(key=lambda o: (o.price, o.instance_type, o.zone))
    return Plan(capacity_type, tuple(overrides), tuple(it.name for it in candidates))
