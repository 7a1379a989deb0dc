"""The provider under test: AWSCloudProvider on moto with a resolved EC2NodeClass."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import pytest_asyncio

from karpenter.core.model.node import NodeClaim, NodeClassRef
from karpenter.providers.aws.cloud import pricing, resolve
from karpenter.providers.aws.cloud.clients import Clients, open_clients
from karpenter.providers.aws.cloud.ec2data import RegionTypes
from karpenter.providers.aws.cloud.provider import AWSCloudProvider
from karpenter.providers.aws.core import pricing as core_pricing
from karpenter.providers.aws.settings import AWSSettings
from tests.providers.aws.cloud.builders import Clock, NodeClasses, node_class
from tests.providers.aws.cloud.conftest import Account, Moto, _session

PRICES = Path("/work/shared/data/ec2-on-demand-prices.json")
NOW = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)


@dataclass
class Env:
    provider: AWSCloudProvider
    classes: NodeClasses
    clock: Clock
    resolver: resolve.Resolver
    clients: Clients


def claim(name: str = "default-1", *types: str, capacity: str = "on-demand") -> NodeClaim:
    reqs: list[tuple[str, str, tuple[str, ...], int | None]] = [
        (
            "karpenter.sh/capacity-type",
            "In",
            (capacity,) if capacity != "any" else ("spot", "on-demand"),
            None,
        ),
        ("karpenter.sh/nodepool", "In", ("default",), None),
    ]
    if types:
        reqs.append(("node.kubernetes.io/instance-type", "In", types, None))
    return NodeClaim(
        name,
        nodepool="default",
        requirements=tuple(reqs),
        requests={"cpu": 1000, "memory": 2 * 2**30 * 1000, "pods": 1000},
        node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default"),
    )


@pytest.fixture(scope="session")
def prices(moto: Moto, region_types: RegionTypes) -> core_pricing.PriceTable:
    """The price file (or estimates) plus moto's spot price history, fetched once."""

    price_file = str(PRICES) if PRICES.exists() else ""

    async def fetch() -> core_pricing.PriceTable:
        table = pricing.initial_table("us-east-1", price_file, region_types.infos)
        async with open_clients("us-east-1", moto.url, _session()) as c:
            # moto has no Pricing API; spot prices come from its DescribeSpotPriceHistory
            return core_pricing.merge(table, None, await pricing.spot(c.ec2, NOW))

    return asyncio.run(fetch())


@pytest_asyncio.fixture
async def env(
    clients: Clients,
    account: Account,
    cluster: str,
    region_types: RegionTypes,
    prices: core_pricing.PriceTable,
) -> AsyncIterator[Env]:
    """A provider for the test's cluster with the default NodeClass resolved and Ready."""
    settings = AWSSettings(
        CLUSTER_NAME=cluster, CLUSTER_ENDPOINT="https://k8s.example", AWS_REGION="us-east-1"
    )
    resolver = resolve.Resolver(clients, cluster, "1.31")
    cls = node_class()
    cls = replace(cls, status=await resolver.status(cls, NOW))
    assert cls.status.ready() == "True", cls.status.conditions
    classes = NodeClasses(cls)
    clock = Clock(NOW.timestamp())  # as in the runtime: one clock for provider and resolver
    provider = AWSCloudProvider(
        clients, settings, classes, region_types, prices, clock, cluster_dns="10.100.0.10"
    )
    yield Env(provider, classes, clock, resolver, clients)
