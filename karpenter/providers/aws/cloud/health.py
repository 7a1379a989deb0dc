"""DescribeInstanceStatus: the three OR'd queries upstream polls, read into InstanceHealth.

Impaired instance checks, impaired system checks, and scheduled events are separate calls
(filters within one call are ANDed); ``UnauthorizedOperation`` is logged by the caller and
treated as "no news", as upstream does.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import health

QUERIES = (
    [{"Name": "instance-status.status", "Values": ["impaired"]}],
    [{"Name": "system-status.status", "Values": ["impaired"]}],
    [{"Name": "event.code", "Values": sorted(health.EVENT_CODES)}],
)


def _check(summary: Mapping[str, Any]) -> health.Check:
    for detail in summary.get("Details", []):
        if detail.get("Status") == "failed":
            since = detail.get("ImpairedSince")
            return health.Check(True, since.timestamp() if isinstance(since, datetime) else None)
    return health.Check()


def parse(item: Mapping[str, Any]) -> health.InstanceHealth:
    """One InstanceStatuses entry (as botocore returns it)."""
    return health.InstanceHealth(
        str(item["InstanceId"]),
        _check(item.get("InstanceStatus", {})),
        _check(item.get("SystemStatus", {})),
        tuple(str(e.get("Code", "")) for e in item.get("Events", [])),
    )


async def describe(ec2: Client) -> list[health.InstanceHealth]:
    """Every instance any of the three queries returns."""
    out: list[health.InstanceHealth] = []
    for filters in QUERIES:
        pages = ec2.get_paginator("describe_instance_status").paginate(
            Filters=filters, IncludeAllInstances=False
        )
        async for page in pages:
            out.extend(parse(item) for item in page.get("InstanceStatuses", []))
    return out
