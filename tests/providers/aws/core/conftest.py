"""Real EC2 descriptions for the pure tests: moto's bundled DescribeInstanceTypes capture, plus the
packaged VPC limits table."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from karpenter.providers.aws import preset as awspreset
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.vpclimits import VpcLimits


@pytest.fixture(scope="session")
def ec2() -> dict[str, InstanceTypeInfo]:
    """us-east-1's instance types by name."""
    return {i.name: i for i in awspreset.region_data("us-east-1").infos}


@pytest.fixture(scope="session")
def vpc() -> Mapping[str, VpcLimits]:
    """The packaged VPC resource controller limits table, by type."""
    return awspreset.vpc_limits().types
