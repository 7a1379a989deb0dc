"""Refresh of AWS prices and instance types on upstream's schedule (every 12 hours).

Prices: on-demand from the Pricing API (skipped in isolated VPCs), spot from EC2; a failed
refresh keeps the current table (offline file or estimates at first) and retries in a minute.
Instance types: DescribeInstanceTypes/Offerings; the provider rebuilds its catalogue from them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from karpenter.providers.aws.cloud import ec2data, pricing
from karpenter.providers.aws.cloud.clients import Clients
from karpenter.providers.aws.core.pricing import PriceTable

PERIOD_SECONDS = 12 * 3600.0
RETRY_SECONDS = 60.0


class Priced(Protocol):
    """Holds the price table and the region's instance types (the AWS provider)."""

    clients: Clients
    prices: PriceTable
    region: ec2data.RegionTypes


class Refresher:
    """``prices()`` and ``instance_types()`` each return seconds until their next run."""

    def __init__(
        self, target: Priced, now: Callable[[], float], isolated_vpc: bool, log: Any = None
    ) -> None:
        self.target = target
        self.now = now
        self.isolated_vpc = isolated_vpc
        self.log = log or structlog.get_logger().bind(controller="providers.pricing")

    async def prices(self) -> float:
        """Refresh prices; on failure keep the table and retry soon."""
        c = self.target.clients
        when = datetime.fromtimestamp(self.now(), UTC)
        try:
            table = await pricing.refresh(
                self.target.prices, c.ec2, c.pricing, when, self.isolated_vpc
            )
        except Exception as err:  # keep serving the last good prices
            self.log.error("refreshing prices failed", error=str(err))
            return RETRY_SECONDS
        self.target.prices = table
        return PERIOD_SECONDS

    async def instance_types(self) -> float:
        """Refresh instance types and offerings; on failure keep them and retry soon."""
        try:
            self.target.region = await ec2data.discover(self.target.clients.ec2)
        except Exception as err:
            self.log.error("refreshing instance types failed", error=str(err))
            return RETRY_SECONDS
        return PERIOD_SECONDS
