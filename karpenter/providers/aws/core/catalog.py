"""The AWS instance-type catalogue: EC2 descriptions + zones + prices → core InstanceTypes.

The controller (from DescribeInstanceTypes/Offerings) and ``simulate``'s ``aws`` preset (from
moto's bundled EC2 data) both come through ``build``, so a simulated node has exactly the
capacity, overhead, labels and offerings the controller would compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from karpenter.core.model import labels as lbl
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.providers.aws.core import (
    amifamily,
    capacity,
    ec2types,
    kubeletexpr,
    placement,
    reservations,
)
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core.capacity import CapacityOptions
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.pricing import PriceTable
from karpenter.providers.aws.core.unavailable import UnavailableOfferings

# Every key a type's requirements name: simulate and the scheduler treat them as well-known.
WELL_KNOWN = frozenset(
    {
        *awslbl.ALL,
        *placement.LABELS,
        *reservations.LABELS,
        lbl.ZONE,
        lbl.REGION,
        lbl.INSTANCE_TYPE,
        lbl.ARCH,
        lbl.OS,
    }
)


@dataclass(frozen=True, slots=True)
class CatalogInput:
    """Everything ``build`` needs besides the descriptions."""

    region: str
    zones: Mapping[str, tuple[str, ...]]  # instance type → zones offering it
    prices: PriceTable
    zone_ids: Mapping[str, str] = field(default_factory=dict)
    capacity: CapacityOptions = field(default_factory=CapacityOptions)
    allowed_zones: frozenset[str] | None = None  # the NodeClass's subnet zones (None: all)
    # spec.networkInterfaces as (card, device, type): types that cannot host them are unavailable
    network_interfaces: tuple[tuple[int, int, str], ...] = ()
    nitro_only: bool = False  # connectionTracking is only honoured by Nitro instances
    # cpuOptions.nestedVirtualization=enabled: only processors that advertise the feature
    nested_virtualization: bool = False
    # memory (milli-bytes) seen on registered Nodes, by type; replaces the overhead estimate
    discovered_memory: Mapping[str, int] = field(default_factory=dict)
    placement_group: nc.PlacementGroup | None = None  # the NodeClass's resolved group
    shifted_zone_ids: frozenset[str] = frozenset()  # ARC zonal shift: no offerings there
    # the NodeClass's capacity reservations and how many instances each can still start
    reservations: tuple[reservations.CapacityReservation, ...] = ()
    reservation_available: Mapping[str, int] = field(default_factory=dict)


NESTED_VIRTUALIZATION = "nested-virtualization"  # a ProcessorInfo.SupportedFeatures value


def _os(family: str, arch: str) -> tuple[str, ...]:
    if family in amifamily.WINDOWS:
        return ("windows",) if arch == "amd64" else ()
    return ("linux",)


def requirements(
    info: InstanceTypeInfo,
    zones: Iterable[str],
    inp: CatalogInput,
    reserved: tuple[Offering, ...] = (),
) -> Requirements:
    """The type's label requirements; every AWS key it lacks becomes DoesNotExist."""
    family = inp.capacity.ami_family
    arch = ec2types.arch_label(info)
    values = awslbl.instance_labels(info)
    zone_list = sorted(zones)
    reqs = [
        Requirement.new(lbl.INSTANCE_TYPE, "In", [info.name]),
        Requirement.new(lbl.ARCH, "In", [arch]),
        Requirement.new(lbl.OS, "In", _os(family, arch)),
        Requirement.new(lbl.ZONE, "In", zone_list),
        Requirement.new(lbl.REGION, "In", [inp.region]),
        Requirement.new(
            lbl.CAPACITY_TYPE,
            "In",
            sorted(set(info.usage_classes) & {"on-demand", "spot"} | _reserved_type(reserved)),
        ),
        Requirement.new(awslbl.TENANCY, "In", ["default"]),
    ]
    build = amifamily.windows_build(family)
    reqs.append(
        Requirement.new(lbl.WINDOWS_BUILD, "In", [build])
        if build
        else Requirement.new(lbl.WINDOWS_BUILD, "DoesNotExist")
    )
    reqs.extend(reservations.requirements(reserved, reservations.types_by_id(inp.reservations)))
    ids = sorted({inp.zone_ids[z] for z in zone_list if z in inp.zone_ids})
    if ids:
        reqs.append(Requirement.new(awslbl.ZONE_ID, "In", ids))
    for key in awslbl.ALL:
        if key in (awslbl.TENANCY, awslbl.ZONE_ID):
            continue
        value = values.get(key)
        reqs.append(
            Requirement.new(key, "In", [value]) if value else Requirement.new(key, "DoesNotExist")
        )
    reqs.extend(placement.requirements(inp.placement_group))
    return Requirements(reqs)


def _reserved_type(reserved: tuple[Offering, ...]) -> set[str]:
    return {lbl.CAPACITY_TYPE_RESERVED} if reserved else set()


def offerings(
    info: InstanceTypeInfo,
    zones: Iterable[str],
    inp: CatalogInput,
    unavailable: UnavailableOfferings | None,
    now: float,
) -> tuple[Offering, ...]:
    """One offering per zone × capacity type; unpriced, ICE-cached or zonal-shifted ones are
    unavailable.

    ICE met inside the NodeClass's placement group counts here too, ICE met in other groups
    does not.
    """
    out = []
    for zone in sorted(zones):
        for ct in ("on-demand", "spot"):
            if ct not in info.usage_classes:
                continue
            price = (
                inp.prices.on_demand_price(info.name)
                if ct == "on-demand"
                else inp.prices.spot_price(info.name, zone)
            )
            ice = unavailable is not None and unavailable.is_unavailable(
                ct, info.name, zone, now, placement.ice_scope(inp.placement_group)
            )
            shifted = inp.zone_ids.get(zone, "") in inp.shifted_zone_ids
            ok = price is not None and not ice and not shifted
            out.append(Offering(zone, ct, price if price is not None else 0.0, ok))
    return tuple(out)


def compatible(
    info: InstanceTypeInfo, family: str, nics: tuple[tuple[int, int, str], ...] = ()
) -> bool:
    """NodeClass compatibility upstream applies before offering a type.

    a1 types lack AL2023 images; requested network interfaces must fit the type's cards,
    and its efa-only ones its EFA limit.
    """
    if family == amifamily.AL2023 and info.name.startswith("a1."):
        return False
    if any(card >= info.network_cards for card, _, _ in nics):
        return False
    return sum(1 for _, _, kind in nics if kind == "efa-only") <= info.max_efa


def instance_type(
    info: InstanceTypeInfo,
    inp: CatalogInput,
    unavailable: UnavailableOfferings | None = None,
    now: float = 0.0,
) -> InstanceType | None:
    """One core InstanceType, or None when the type is offered in no allowed zone (or its
    kubelet expressions give no usable value)."""
    zones = set(inp.zones.get(info.name, ()))
    if inp.allowed_zones is not None:
        zones &= inp.allowed_zones
    if not zones:
        return None
    reserved = reservations.offerings(
        info.name,
        inp.reservations,
        inp.prices.on_demand_price(info.name),
        inp.reservation_available,
        zones,
    )
    # a reservation in a zone under an ARC zonal shift is as unusable as any other capacity there
    reserved = tuple(
        replace(o, available=False) if inp.zone_ids.get(o.zone, "") in inp.shifted_zone_ids else o
        for o in reserved
    )
    offers = (*offerings(info, zones, inp, unavailable, now), *reserved)
    nitro_ok = not inp.nitro_only or info.hypervisor == "nitro"
    nested_ok = not inp.nested_virtualization or NESTED_VIRTUALIZATION in info.features
    compat = compatible(info, inp.capacity.ami_family, inp.network_interfaces)
    if not (nitro_ok and nested_ok and compat and placement.supports(info, inp.placement_group)):
        offers = tuple(replace(o, available=False) for o in offers)
    try:
        opts = kubeletexpr.for_type(inp.capacity, info)
    except kubeletexpr.ExpressionError:
        return None  # no capacity to promise; the class's ValidationSucceeded says why
    cap = capacity.capacity(info, opts)
    seen = inp.discovered_memory.get(info.name)
    if seen is not None:
        cap["memory"] = seen
    return InstanceType(
        info.name,
        requirements(info, zones, inp, reserved),
        offers,
        cap,
        capacity.overhead(info, opts),
    )


def build(
    infos: Iterable[InstanceTypeInfo],
    inp: CatalogInput,
    unavailable: UnavailableOfferings | None = None,
    now: float = 0.0,
) -> tuple[InstanceType, ...]:
    """The catalogue, sorted by name; undiscoverable (non-HVM, i386) types are left out."""
    out = []
    for info in sorted(infos, key=lambda i: i.name):
        if not ec2types.discoverable(info) or info.vcpus <= 0:
            continue
        it = instance_type(info, inp, unavailable, now)
        if it is not None and it.capacity.get("pods", 0) > 0:
            out.append(it)
    return tuple(out)
