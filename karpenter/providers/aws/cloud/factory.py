"""Building the AWS provider: clients, instance-type discovery, the offline price table.

``open_provider`` is what the composition root (``operator.py``) calls: it opens the SDK
clients, fills the cluster endpoint, CA and service CIDR from EKS where the settings leave them
empty, discovers the region's instance types (fatal on failure, as upstream), starts prices
from ``AWS_PRICE_FILE`` or the labelled estimate (the 12-hourly refresh replaces them with the
Pricing API's), hydrates the launch-template cache, and closes the clients on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from karpenter.providers.aws.cloud import clients as aws_clients
from karpenter.providers.aws.cloud import cluster, ec2data, pricing, resolve, startup
from karpenter.providers.aws.cloud.provider import AWSCloudProvider, NodeClassSource
from karpenter.providers.aws.settings import AWSSettings

if TYPE_CHECKING:
    import aioboto3


@contextlib.asynccontextmanager
async def open_provider(
    settings: AWSSettings,
    nodeclasses: NodeClassSource,
    now: Callable[[], float],
    endpoint_url: str | None = None,
    session: aioboto3.Session | None = None,
    cluster_dns: str = "",
    cluster_cidr: str = "",
    min_values_best_effort: bool = False,
) -> AsyncIterator[AWSCloudProvider]:
    """A ready AWSCloudProvider for ``settings.AWS_REGION``."""
    region = settings.AWS_REGION
    async with aws_clients.open_clients(region, endpoint_url, session) as c:
        await startup.check_ec2(c.ec2, region)
        settings, cidr, version, arn = await _cluster(c, settings)
        cluster_cidr = cluster_cidr or cidr
        types = await ec2data.discover(c.ec2)
        prices = pricing.initial_table(region, settings.AWS_PRICE_FILE, types.infos)
        provider = AWSCloudProvider(
            c, settings, nodeclasses, types, prices, now, cluster_dns, cluster_cidr
        )
        # EKS_CONTROL_PLANE: the Kubernetes version comes from EKS, not the apiserver
        provider.eks_version = version if settings.EKS_CONTROL_PLANE else ""
        provider.min_values_best_effort = min_values_best_effort  # MIN_VALUES_POLICY
        provider.cluster_arn = arn
        await provider.launch_templates.hydrate(now())
        yield provider


async def _cluster(
    c: aws_clients.Clients, settings: AWSSettings
) -> tuple[AWSSettings, str, str, str]:
    """Endpoint, CA and service CIDR from EKS where the settings leave them empty (and the
    version and ARN as EKS says).

    Without ``CLUSTER_ENDPOINT`` EKS must answer (upstream exits otherwise); with it, a failed
    DescribeCluster only leaves the CIDR unknown (AL2023 nodes then cannot be configured).
    """
    try:
        info = await cluster.resolve(c.eks, settings)
    except Exception:
        if not settings.CLUSTER_ENDPOINT:
            raise
        return settings, "", "", ""
    update = {"CLUSTER_ENDPOINT": info.endpoint, "CLUSTER_CA_BUNDLE": info.ca_bundle}
    return settings.model_copy(update=update), info.service_cidr, info.version, info.arn


def resolver(
    provider: AWSCloudProvider, k8s_version: str, reserved_capacity: bool = True
) -> resolve.Resolver:
    """The NodeClass resolver for the provider's account, honouring ``DISABLE_DRY_RUN`` and the
    ReservedCapacity feature gate; the provider judges ``spec.kubelet`` (NodeClassCEL)."""
    s = provider.settings
    return resolve.Resolver(
        provider.clients,
        s.CLUSTER_NAME,
        k8s_version,
        not s.DISABLE_DRY_RUN,
        availability=provider.reservation_availability,
        reserved_capacity=reserved_capacity,
        kubelet_check=provider.kubelet_verdict,
    )
