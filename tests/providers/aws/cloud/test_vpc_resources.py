"""The controller's instance types and launches carry the static VPC limits' pod-eni."""

from __future__ import annotations

import pytest

from karpenter.providers.aws.cloud import ec2data
from karpenter.providers.aws.cloud.ec2data import RegionTypes
from tests.providers.aws.cloud.fixtures import Env, claim, env, prices

__all__ = ("env", "prices")

POD_ENI = "vpc.amazonaws.com/pod-eni"


def test_discovery_carries_the_packaged_table(region_types: RegionTypes) -> None:
    """Instance-type discovery attaches the packaged VPC limits (m5.large: 9 branch ENIs)."""
    assert region_types.vpc_limits["m5.large"].branch_interfaces == 9
    assert region_types.vpc_limits is ec2data.static_vpc_limits().types


@pytest.mark.asyncio
async def test_catalog_and_launch_have_pod_eni(env: Env) -> None:
    """The NodeClass's catalogue offers pod-eni on trunking types; the launched claim has it."""
    types = {it.name: it for it in env.provider.catalog(env.classes.items["default"])}
    assert types["m5.large"].capacity[POD_ENI] == 9_000
    got = await env.provider.create(claim("default-1", "m5.large"))
    assert got.capacity[POD_ENI] == 9_000
    assert got.allocatable[POD_ENI] == 9_000
