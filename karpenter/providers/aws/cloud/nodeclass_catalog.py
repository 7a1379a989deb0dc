"""The catalogue of one EC2NodeClass: which knobs of the class change capacity and offerings.

The provider memoizes the result; this module only maps settings + NodeClass + region data onto
``aws/core/catalog.py``'s input.
"""

from __future__ import annotations

from collections.abc import Mapping

from karpenter.providers.aws.cloud.ec2data import RegionTypes
from karpenter.providers.aws.core import amifamily, catalog
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core.capacity import CapacityOptions
from karpenter.providers.aws.core.kubeletexpr import Evaluator
from karpenter.providers.aws.core.pricing import PriceTable
from karpenter.providers.aws.core.vpclimits import VpcLimits
from karpenter.providers.aws.settings import AWSSettings


def capacity_options(
    settings: AWSSettings,
    node_class: nc.EC2NodeClass,
    vpc_limits: Mapping[str, VpcLimits] | None = None,
    evaluate: Evaluator | None = None,
) -> CapacityOptions:
    """Capacity knobs from settings and the NodeClass (family, kubelet, volumes, NICs), plus the
    static VPC limits table; ``evaluate`` resolves kubelet expressions (NodeClassCEL on)."""
    family = node_class.resolved_family()
    device = amifamily.features(family).ephemeral_device
    size = next(
        (
            b.volume_size_bytes
            for b in node_class.spec.block_device_mappings
            if b.root_volume or b.device_name == device
        ),
        None,
    )
    return CapacityOptions(
        vm_memory_overhead_percent=settings.VM_MEMORY_OVERHEAD_PERCENT,
        reserved_enis=settings.RESERVED_ENIS,
        ami_family=family,
        kubelet=node_class.spec.kubelet,
        ephemeral_volume_bytes=size,
        instance_store_raid0=node_class.spec.instance_store_policy == "RAID0",
        efa_only_card0=node_class.spec.efa_only_interfaces(0),
        efa_only=node_class.spec.efa_only_interfaces()
        if node_class.spec.network_interfaces
        else None,
        vpc_limits=vpc_limits or {},
        evaluate=evaluate,
    )


def catalog_input(
    settings: AWSSettings,
    node_class: nc.EC2NodeClass,
    region: RegionTypes,
    prices: PriceTable,
    discovered_memory: Mapping[str, int],
    shifted_zone_ids: frozenset[str] = frozenset(),
    reservation_available: Mapping[str, int] | None = None,
    evaluate: Evaluator | None = None,
) -> catalog.CatalogInput:
    """``catalog.build``'s input for the class (zones limited to its subnets'; reserved
    offerings from its ``status.capacityReservations`` with the counts Karpenter knows)."""
    return catalog.CatalogInput(
        region=settings.AWS_REGION,
        zones=region.zones,
        prices=prices,
        zone_ids=region.zone_ids,
        capacity=capacity_options(settings, node_class, region.vpc_limits, evaluate),
        allowed_zones=frozenset(s.zone for s in node_class.status.subnets),
        discovered_memory=discovered_memory,
        network_interfaces=tuple(
            (n.network_card_index, n.device_index, n.interface_type)
            for n in node_class.spec.network_interfaces
        ),
        nitro_only=node_class.spec.connection_tracking is not None,
        nested_virtualization=node_class.spec.nested_virtualization == "enabled",
        placement_group=node_class.status.placement_group(),
        shifted_zone_ids=shifted_zone_ids,
        reservations=node_class.status.capacity_reservations,
        reservation_available=dict(reservation_available or {}),
    )
