"""Price refresh: the Pricing API (on-demand) and DescribeSpotPriceHistory (spot).

The table starts from the offline source (``AWS_PRICE_FILE`` or the labelled estimate) and
each refresh merges newer numbers over it, never shrinking it. Isolated VPCs and GovCloud skip
the Pricing API, as upstream does; spot prices still come from EC2.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import pricing
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo

SPOT_PRODUCTS = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]


def initial_table(
    region: str, price_file: str, infos: tuple[InstanceTypeInfo, ...]
) -> pricing.PriceTable:
    """The offline table: the price file if given, estimates for the rest."""
    table = pricing.PriceTable(region)
    if price_file:
        table = pricing.from_file(json.loads(Path(price_file).read_text(encoding="utf-8")), region)
    return pricing.fill_estimates(table, infos)


async def on_demand(client: Client, region: str) -> dict[str, float]:
    """Linux on-demand prices of the region: shared tenancy plus bare-metal dedicated."""
    prices: dict[str, float] = {}
    for metal in (False, True):
        pages = client.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2",
            Filters=pricing.pricing_filters(region, metal),
            PaginationConfig={"PageSize": 100},
        )
        found = 0
        async for page in pages:
            for item in page.get("PriceList", []):
                parsed = pricing.parse_price_list_item(item)
                if parsed is not None:
                    prices[parsed[0]] = parsed[1]
                    found += 1
        if not found:
            raise ValueError(f"no on-demand pricing found (bare metal: {metal})")
    return prices


async def spot(ec2: Client, now: datetime) -> dict[tuple[str, str], float]:
    """Latest spot price per (type, zone)."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        ProductDescriptions=SPOT_PRODUCTS, StartTime=now, PaginationConfig={"PageSize": 1000}
    )
    async for page in pages:
        for row in page.get("SpotPriceHistory", []):
            key = (str(row["InstanceType"]), str(row["AvailabilityZone"]))
            stamp = row.get("Timestamp") or now
            price = float(row["SpotPrice"])
            if key not in latest or stamp >= latest[key][0]:
                latest[key] = (stamp, price)
    return {k: v[1] for k, v in latest.items()}


async def refresh(
    table: pricing.PriceTable,
    clients_ec2: Client,
    pricing_client: Client,
    now: datetime,
    isolated_vpc: bool,
) -> pricing.PriceTable:
    """Both refreshes merged over ``table`` (the on-demand one only outside isolated VPCs)."""
    od = None
    if not isolated_vpc and not table.region.startswith("us-gov"):
        od = await on_demand(pricing_client, table.region)
    return pricing.merge(table, od, await spot(clients_ec2, now))
