"""AWS SDK clients: one aioboto3 session, the clients Karpenter calls, opened and closed together.

Clients are untyped (aioboto3 ships no stubs); every response is read into typed values in the
module that made the call, so no botocore shape leaves ``providers.aws.cloud``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aioboto3
from botocore.config import Config

from karpenter.providers.aws.core import pricing

# Upstream: HTTP client timeout 4 minutes, SDK standard retries.
_CONFIG = Config(read_timeout=240, connect_timeout=30, retries={"mode": "standard"})

Client = Any  # an aiobotocore client; methods are the AWS API's, resolved at run time


@dataclass(frozen=True, slots=True)
class Clients:
    """The open clients (``pricing`` lives in the Pricing API's own region)."""

    region: str
    ec2: Client
    ssm: Client
    iam: Client
    sqs: Client
    pricing: Client
    eks: Client
    arc: Client = None  # ARC zonal shift (``arc-zonal-shift``)


@contextlib.asynccontextmanager
async def open_clients(
    region: str, endpoint_url: str | None = None, session: aioboto3.Session | None = None
) -> AsyncIterator[Clients]:
    """Open every client for ``region``; ``endpoint_url`` points them at one endpoint (moto)."""
    session = session or aioboto3.Session(region_name=region)
    kw: dict[str, Any] = {"config": _CONFIG, "region_name": region}
    if endpoint_url:
        kw["endpoint_url"] = endpoint_url
    async with contextlib.AsyncExitStack() as stack:
        made = {
            name: await stack.enter_async_context(session.client(name, **kw))
            for name in ("ec2", "ssm", "iam", "sqs", "eks", "arc-zonal-shift")
        }
        price_kw = {**kw, "region_name": pricing.pricing_api_region(region)}
        made["pricing"] = await stack.enter_async_context(session.client("pricing", **price_kw))
        yield Clients(
            region,
            made["ec2"],
            made["ssm"],
            made["iam"],
            made["sqs"],
            made["pricing"],
            made["eks"],
            made["arc-zonal-shift"],
        )
