"""Instance-type discovery: DescribeInstanceTypes, DescribeInstanceTypeOfferings, zone ids.

Upstream's filters: HVM, x86_64 or arm64; offerings by availability zone. The results feed
``aws/core/catalog.py``; upstream refreshes them every 12h. The VPC resource controller's static
per-type limits (``pod-eni`` and Windows IPs, which EC2 does not describe) ride along, read from
the package data ``aws/core/vpclimits.py`` decodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import ec2types, vpclimits
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo

REFRESH_SECONDS = 12 * 3600.0


@dataclass(frozen=True, slots=True)
class RegionTypes:
    """What EC2 offers in the region."""

    infos: tuple[InstanceTypeInfo, ...]
    zones: Mapping[str, tuple[str, ...]]
    zone_ids: Mapping[str, str]
    vpc_limits: Mapping[str, vpclimits.VpcLimits] = field(default_factory=dict)


@cache  # immutable package data: decoded once per process, shared by every refresh
def static_vpc_limits() -> vpclimits.Table:
    """The VPC limits table shipped with the package (``hack/gen-vpc-limits.py``)."""
    blob = resources.files(vpclimits.DATA_PACKAGE).joinpath(*vpclimits.DATA_PATH).read_bytes()
    return vpclimits.decode(blob)


async def instance_types(ec2: Client) -> tuple[InstanceTypeInfo, ...]:
    """Every discoverable instance type of the region."""
    pages = ec2.get_paginator("describe_instance_types").paginate(
        Filters=[
            {"Name": "supported-virtualization-type", "Values": ["hvm"]},
            {"Name": "processor-info.supported-architecture", "Values": ["x86_64", "arm64"]},
        ],
        PaginationConfig={"PageSize": 100},
    )
    out: list[InstanceTypeInfo] = []
    async for page in pages:
        out.extend(ec2types.parse(item) for item in page.get("InstanceTypes", []))
    return tuple(out)


async def offerings(ec2: Client) -> dict[str, tuple[str, ...]]:
    """Instance type → zones that offer it."""
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", PaginationConfig={"PageSize": 1000}
    )
    zones: dict[str, set[str]] = {}
    async for page in pages:
        for row in page.get("InstanceTypeOfferings", []):
            zones.setdefault(str(row["InstanceType"]), set()).add(str(row["Location"]))
    return {k: tuple(sorted(v)) for k, v in zones.items()}


async def zone_ids(ec2: Client) -> dict[str, str]:
    """Zone name → zone id."""
    out = await ec2.describe_availability_zones()
    return {str(z["ZoneName"]): str(z["ZoneId"]) for z in out.get("AvailabilityZones", [])}


async def discover(ec2: Client) -> RegionTypes:
    """Types, their zones and the zone ids (plus the static VPC limits), in one value."""
    return RegionTypes(
        await instance_types(ec2),
        await offerings(ec2),
        await zone_ids(ec2),
        static_vpc_limits().types,
    )
