"""Instance health: classification, DescribeInstanceStatus parsing, and the controller."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.cloud import health as aws_health
from karpenter.providers.aws.controllers.health import HealthController
from karpenter.providers.aws.core import health
from tests.providers.aws.cloud.builders import Claims, Clock
from tests.providers.aws.cloud.fixtures import Env, claim, env, prices

__all__ = ("env", "prices")
T0 = dt.datetime(2026, 11, 23, 10, 0, tzinfo=dt.UTC)


def status(
    instance_id: str, instance: str = "ok", system: str = "ok", events: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A DescribeInstanceStatus entry as botocore returns it (abridged, our own values)."""

    def summary(state: str) -> dict[str, Any]:
        detail: dict[str, Any] = {
            "Name": "reachability",
            "Status": "failed" if state == "impaired" else "passed",
        }
        if state == "impaired":
            detail["ImpairedSince"] = T0
        return {"Status": state, "Details": [detail]}

    return {
        "InstanceId": instance_id,
        "AvailabilityZone": "us-east-1a",
        "InstanceState": {"Code": 16, "Name": "running"},
        "InstanceStatus": summary(instance),
        "SystemStatus": summary(system),
        "Events": [{"Code": e, "Description": "scheduled"} for e in events],
    }


@pytest.mark.parametrize(
    ("entry", "seconds", "kind"),
    [
        pytest.param(
            status("i-1", instance="impaired"), 121, "instance_status", id="instance-failed"
        ),
        pytest.param(status("i-1", instance="impaired"), 60, None, id="instance-failed-too-recent"),
        pytest.param(status("i-1", system="impaired"), 300, "system_status", id="system-failed"),
        pytest.param(status("i-1", events=("system-maintenance",)), 0, "event_status", id="event"),
        pytest.param(status("i-1", events=("other",)), 0, None, id="unknown-event"),
        pytest.param(status("i-1"), 1000, None, id="healthy"),
    ],
)
def test_classification(entry: dict[str, Any], seconds: float, kind: str | None) -> None:
    """Failed checks count after 120s; listed events count at once; EBS and others never."""
    got = health.classify([aws_health.parse(entry)], T0.timestamp() + seconds)
    assert [u.kind for u in got] == ([kind] if kind else [])


class Recorded:
    """DescribeInstanceStatus pages per filter name (moto cannot make an instance impaired)."""

    def __init__(self, by_filter: dict[str, list[dict[str, Any]]]) -> None:
        self.by_filter = by_filter

    def get_paginator(self, name: str) -> Recorded:
        assert name == "describe_instance_status"
        return self

    def paginate(self, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        items = self.by_filter.get(kw["Filters"][0]["Name"], [])

        async def pages() -> AsyncIterator[dict[str, Any]]:
            yield {"InstanceStatuses": items}

        return pages()


class Store(Claims):
    def __init__(self, *claims: NodeClaim) -> None:
        super().__init__(*claims)
        self.annotations: dict[str, dict[str, str]] = {}

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        self.annotations[name] = annotations


@pytest.mark.asyncio
async def test_controller_forceful_and_drain() -> None:
    """A failed check: termination timestamp then delete; an event: delete only."""
    broken = NodeClaim("broken", provider_id="aws:///us-east-1a/i-1")
    retiring = NodeClaim("retiring", provider_id="aws:///us-east-1a/i-2")
    ec2 = Recorded(
        {
            "instance-status.status": [status("i-1", instance="impaired")],
            "event.code": [
                status("i-2", events=("instance-retirement",)),
                status("i-9", events=("instance-stop",)),
            ],
        }
    )
    store = Store(broken, retiring)
    ctrl = HealthController(ec2, store, Clock(T0.timestamp() + 600))
    acted, period = await ctrl.reconcile()
    assert [(u.instance_id, u.forceful) for u in acted] == [("i-1", True), ("i-2", False)]
    assert sorted(store.deleted) == ["broken", "retiring"]
    assert store.annotations == {
        "broken": {"karpenter.sh/nodeclaim-termination-timestamp": "2026-11-23T10:10:00Z"}
    }
    assert period == 60.0


@pytest.mark.asyncio
async def test_against_moto_healthy_instances_are_left_alone(env: Env) -> None:
    """Against moto (every instance passes its checks) nothing is replaced."""
    launched = await env.provider.create(claim("default-1", "m5.large", "c5.large"))
    store = Store(launched)
    acted, _ = await HealthController(env.clients.ec2, store, env.clock).reconcile()
    assert acted == [] and store.deleted == []
