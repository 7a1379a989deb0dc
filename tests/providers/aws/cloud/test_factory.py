"""open_provider against moto: EKS cluster details, discovery, offline prices, hydration."""

from __future__ import annotations

import pytest

from karpenter.providers.aws.cloud import factory
from karpenter.providers.aws.cloud.clients import Clients
from karpenter.providers.aws.cloud.factory import open_provider
from karpenter.providers.aws.settings import AWSSettings
from tests.providers.aws.cloud.builders import Clock, NodeClasses
from tests.providers.aws.cloud.conftest import Account, Moto, _session


@pytest.mark.asyncio
async def test_open_provider_discovers_and_prices(moto: Moto, cluster: str) -> None:
    """The provider comes up with the region's types and estimated prices when offline."""
    settings = AWSSettings(
        CLUSTER_NAME=cluster,
        CLUSTER_ENDPOINT="https://k8s.example",
        AWS_REGION="us-east-1",
        AWS_PRICE_FILE="",
    )
    async with open_provider(settings, NodeClasses(), Clock(), moto.url, _session()) as provider:
        assert provider.name == "aws"
        assert ("AcceleratedHardwareReady", "False", 600.0) in {
            (p.condition_type, p.condition_status, p.toleration_seconds)
            for p in provider.repair_policies()
        }
        assert len(provider.region.infos) > 1000
        assert provider.region.zone_ids["us-east-1a"].startswith("use1-az")
        assert "m5.large" in provider.prices.estimated()
        assert provider.launch_templates.cached == ()
        assert provider.settings.CLUSTER_ENDPOINT == "https://k8s.example"
        assert factory.resolver(provider, "1.31").dry_run is True


@pytest.mark.asyncio
async def test_cluster_details_come_from_eks(
    moto: Moto, clients: Clients, account: Account, cluster: str
) -> None:
    """Without CLUSTER_ENDPOINT, EKS DescribeCluster supplies endpoint, CA and service CIDR."""
    await clients.eks.create_cluster(
        name=cluster,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": sorted(account.subnets.values())},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"},
    )
    settings = AWSSettings(CLUSTER_NAME=cluster, AWS_REGION="us-east-1", EKS_CONTROL_PLANE=True)
    async with open_provider(settings, NodeClasses(), Clock(), moto.url, _session()) as provider:
        assert provider.eks_version
        assert provider.settings.CLUSTER_ENDPOINT.startswith("https://")
        assert provider.settings.CLUSTER_CA_BUNDLE
        assert provider.cluster_cidr == "10.100.0.0/16"


@pytest.mark.asyncio
async def test_no_endpoint_and_no_eks_cluster_is_fatal(moto: Moto, cluster: str) -> None:
    """Without CLUSTER_ENDPOINT and without an EKS cluster the provider does not start."""
    settings = AWSSettings(CLUSTER_NAME=f"{cluster}-missing", AWS_REGION="us-east-1")
    with pytest.raises(Exception, match=r"ResourceNotFound|not found"):
        async with open_provider(settings, NodeClasses(), Clock(), moto.url, _session()):
            pass
