"""open_provider against moto: discovery, offline prices, launch-template hydration."""

from __future__ import annotations

import pytest

from karpenter.cloud.aws import factory
from karpenter.cloud.aws.factory import open_provider
from karpenter.settings import AWSSettings
from tests.cloud.aws.builders import Clock, NodeClasses
from tests.cloud.aws.conftest import Moto, _session


@pytest.mark.asyncio
async def test_open_provider_discovers_and_prices(moto: Moto, cluster: str) -> None:
    """The provider comes up with the region's types and estimated prices when offline."""
    settings = AWSSettings(CLUSTER_NAME=cluster, AWS_REGION="us-east-1", AWS_PRICE_FILE="")
    async with open_provider(settings, NodeClasses(), Clock(), moto.url, _session()) as provider:
        assert provider.name == "aws"
        assert len(provider.region.infos) > 1000
        assert provider.region.zone_ids["us-east-1a"].startswith("use1-az")
        assert "m5.large" in provider.prices.estimated()
        assert provider.launch_templates.cached == ()
        assert factory.resolver(provider, "1.31").dry_run is True
