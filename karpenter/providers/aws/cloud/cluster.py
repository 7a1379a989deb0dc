"""The cluster as EKS describes it: endpoint, CA bundle, service CIDR, Kubernetes version.

Upstream reads ``CLUSTER_ENDPOINT`` (else EKS DescribeCluster, fatal on failure) and, for
AL2023's nodeadm NodeConfig, the service CIDR (``serviceIpv4Cidr``, else ``serviceIpv6Cidr``).
Explicit settings win over what EKS says.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.settings import AWSSettings


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What nodes need to join, and the control plane's version."""

    endpoint: str
    ca_bundle: str
    service_cidr: str
    version: str
    arn: str = ""  # what ARC zonal shift knows the cluster by


async def describe(eks: Client, name: str) -> ClusterInfo:
    """EKS DescribeCluster, read."""
    out = (await eks.describe_cluster(name=name))["cluster"]
    net = out.get("kubernetesNetworkConfig", {})
    return ClusterInfo(
        str(out.get("endpoint", "")),
        str(out.get("certificateAuthority", {}).get("data", "")),
        str(net.get("serviceIpv4Cidr") or net.get("serviceIpv6Cidr") or ""),
        str(out.get("version", "")),
        str(out.get("arn", "")),
    )


async def resolve(eks: Client, settings: AWSSettings) -> ClusterInfo:
    """Settings first; EKS fills what they leave empty."""
    info = await describe(eks, settings.CLUSTER_NAME)
    return ClusterInfo(
        settings.CLUSTER_ENDPOINT or info.endpoint,
        settings.CLUSTER_CA_BUNDLE or info.ca_bundle,
        info.service_cidr,
        info.version,
        info.arn,
    )
