"""Price refresh: spot from moto's spot price history; the Pricing API path on recorded pages."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog

from karpenter.providers.aws.cloud import pricing
from karpenter.providers.aws.controllers.refresh import PERIOD_SECONDS, RETRY_SECONDS, Refresher
from karpenter.providers.aws.core import pricing as core_pricing
from tests.providers.aws.cloud.fixtures import Env, env, prices

__all__ = ("env", "prices")


def product(instance_type: str, usd: str) -> str:
    """A GetProducts PriceList entry, in the shape the Pricing API returns (abridged)."""
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": "us-east-1",
                    "tenancy": "Shared",
                },
                "sku": "SKU1",
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    "SKU1.JRTCKXETXF": {
                        "priceDimensions": {
                            "SKU1.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": usd},
                                "description": f"On Demand Linux {instance_type}",
                            }
                        },
                        "sku": "SKU1",
                    }
                }
            },
        }
    )


class RecordedPricing:
    """Stands in for the Pricing client with recorded pages (moto does not serve the API)."""

    def __init__(self, pages: dict[bool, list[list[str]]]) -> None:
        self.pages = pages
        self.filters: list[list[dict[str, str]]] = []

    def get_paginator(self, name: str) -> RecordedPricing:
        assert name == "get_products"
        return self

    def paginate(self, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        self.filters.append(kw["Filters"])
        metal = any(f["Value"] == "Dedicated" for f in kw["Filters"])

        async def pages() -> AsyncIterator[dict[str, Any]]:
            for page in self.pages[metal]:
                yield {"PriceList": page}

        return pages()


@pytest.mark.asyncio
async def test_on_demand_parses_both_tenancies() -> None:
    """Shared and bare-metal dedicated pages merge into one table; zero prices are skipped."""
    client = RecordedPricing(
        {
            False: [[product("m5.large", "0.0960000000"), product("m5.xlarge", "0.0000000000")]],
            True: [[product("m5.metal", "4.6080000000")]],
        }
    )
    got = await pricing.on_demand(client, "us-east-1")
    assert got == {"m5.large": 0.096, "m5.metal": 4.608}
    assert {f["Field"]: f["Value"] for f in client.filters[0]}["operatingSystem"] == "Linux"


@pytest.mark.asyncio
async def test_on_demand_empty_is_an_error() -> None:
    """An empty answer is an error (a refresh never empties the table)."""
    with pytest.raises(ValueError, match="no on-demand pricing"):
        await pricing.on_demand(RecordedPricing({False: [[]], True: [[]]}), "us-east-1")


@pytest.mark.asyncio
async def test_refresh_keeps_table_when_pricing_api_fails(env: Env) -> None:
    """moto has no Pricing API: the refresh fails, the old table stays, retry in a minute."""
    before = env.provider.prices
    refresher = Refresher(env.provider, env.clock, isolated_vpc=False)
    with structlog.testing.capture_logs() as logs:
        assert await refresher.prices() == RETRY_SECONDS
    assert env.provider.prices is before
    assert any(e["event"] == "refreshing prices failed" for e in logs)


@pytest.mark.asyncio
async def test_isolated_vpc_refreshes_spot_only(env: Env) -> None:
    """In an isolated VPC only spot prices are fetched (from EC2), every 12 hours."""
    env.provider.prices = core_pricing.PriceTable(
        "us-east-1", {"m5.large": 0.096}, {}, {"m5.large": 0.096}
    )
    refresher = Refresher(env.provider, env.clock, isolated_vpc=True)
    assert await refresher.prices() == PERIOD_SECONDS
    table = env.provider.prices
    assert table.on_demand_price("m5.large") == 0.096
    assert table.spot_price("m5.large", "us-east-1a") == 0.00001
    before = env.provider.catalog(env.classes.items["default"])
    assert await refresher.instance_types() == PERIOD_SECONDS
    assert "m5.large" in env.provider.region.zones
    # the catalogue is rebuilt from the refreshed data (same content here, a new value)
    assert env.provider.catalog(env.classes.items["default"]) is not before
