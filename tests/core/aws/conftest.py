"""Real EC2 descriptions for the pure tests: moto's bundled DescribeInstanceTypes capture."""

from __future__ import annotations

import pytest

from karpenter.core.aws.ec2types import InstanceTypeInfo
from karpenter.simulate import awspreset


@pytest.fixture(scope="session")
def ec2() -> dict[str, InstanceTypeInfo]:
    """us-east-1's instance types by name."""
    return {i.name: i for i in awspreset.region_data("us-east-1").infos}
