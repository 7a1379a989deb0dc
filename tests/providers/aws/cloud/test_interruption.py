"""Interruption end to end on moto: SQS message → NodeClaim deleted → replacement launched."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
import structlog

from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.cloud import sqs
from karpenter.providers.aws.controllers.interruption import InterruptionController
from tests.providers.aws.cloud.builders import Claims, Events
from tests.providers.aws.cloud.fixtures import Env, claim, env, prices

__all__ = ("env", "prices")
TYPES = ("m5.large", "c5.large")


def ec2_event(detail_type: str, detail: dict[str, Any], source: str = "aws.ec2") -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "7bf73129-1428-4cd3-a780-95db273d1602",
            "detail-type": detail_type,
            "source": source,
            "account": "123456789012",
            "time": "2026-11-23T10:00:00Z",
            "region": "us-east-1",
            "resources": [],
            "detail": detail,
        }
    )


def body(kind: str, instance_id: str) -> str:
    if kind == "spot":
        return ec2_event(
            "EC2 Spot Instance Interruption Warning",
            {"instance-id": instance_id, "instance-action": "terminate"},
        )
    if kind == "rebalance":
        return ec2_event("EC2 Instance Rebalance Recommendation", {"instance-id": instance_id})
    if kind == "scheduled":
        return ec2_event(
            "AWS Health Event",
            {
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "service": "EC2",
                "eventTypeCategory": "scheduledChange",
                "affectedEntities": [{"entityValue": instance_id}],
            },
            source="aws.health",
        )
    if kind == "capacity-reservation":
        return ec2_event(
            "EC2 Capacity Reservation Instance Interruption Warning", {"instance-id": instance_id}
        )
    return ec2_event(
        "EC2 Instance State-change Notification", {"instance-id": instance_id, "state": kind}
    )


async def setup(env: Env, cluster: str, capacity: str) -> tuple[str, Claims, NodeClaim]:
    url = (await env.clients.sqs.create_queue(QueueName=cluster))["QueueUrl"]
    launched = await env.provider.create(claim("default-1", *TYPES, capacity=capacity))
    return url, Claims(launched), launched


async def queue_depth(env: Env, url: str) -> int:
    attrs = await env.clients.sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )
    a = attrs["Attributes"]
    return int(a["ApproximateNumberOfMessages"]) + int(a["ApproximateNumberOfMessagesNotVisible"])


@pytest.mark.parametrize(
    ("kind", "capacity", "deleted", "reason"),
    [
        pytest.param("spot", "spot", True, "SpotInterrupted", id="spot-interruption"),
        pytest.param("rebalance", "spot", False, "SpotRebalanceRecommendation", id="rebalance"),
        pytest.param("scheduled", "on-demand", True, "InstanceUnhealthy", id="scheduled-change"),
        pytest.param("stopping", "on-demand", True, "InstanceStopping", id="state-stopping"),
        pytest.param("terminated", "on-demand", True, "InstanceTerminating", id="state-terminated"),
        pytest.param(
            "capacity-reservation",
            "on-demand",
            True,
            "CapacityReservationInstanceInterrupted",
            id="capacity-reservation",
        ),
    ],
)
@pytest.mark.asyncio
async def test_message_kind_end_to_end(
    env: Env, cluster: str, kind: str, capacity: str, deleted: bool, reason: str
) -> None:
    """The message deletes (or, for rebalance, keeps) the claim; the queue ends empty."""
    url, claims, launched = await setup(env, cluster, capacity)
    instance_id = launched.provider_id.rsplit("/", 1)[1]
    await env.clients.sqs.send_message(QueueUrl=url, MessageBody=body(kind, instance_id))
    events = Events()
    ctrl = InterruptionController(claims, env.provider.unavailable, env.clock, events)
    stats = await sqs.poll_once(env.clients.sqs, url, ctrl.handle, ctrl.log, wait_seconds=0)
    assert (stats.received, stats.handled, stats.deleted) == (1, 1, 1)
    assert await queue_depth(env, url) == 0
    assert claims.deleted == (["default-1"] if deleted else [])
    assert ("default-1", reason) in events.items
    if not deleted:
        return
    # the claim's pods are pending again: the provisioner's replacement claim launches
    replacement = await env.provider.create(claim("default-2", *TYPES, capacity=capacity))
    assert replacement.provider_id != launched.provider_id
    if kind == "spot":
        # the interrupted spot pool is avoided for 3 minutes
        old = (
            launched.labels["node.kubernetes.io/instance-type"],
            launched.labels["topology.kubernetes.io/zone"],
        )
        new = (
            replacement.labels["node.kubernetes.io/instance-type"],
            replacement.labels["topology.kubernetes.io/zone"],
        )
        assert new != old
        assert env.provider.unavailable.is_unavailable("spot", *old, env.clock())


@pytest.mark.asyncio
async def test_malformed_and_foreign_messages_are_deleted(env: Env, cluster: str) -> None:
    """Junk is logged and deleted, foreign events are no-ops; nothing crashes or is deleted."""
    url, claims, _ = await setup(env, cluster, "on-demand")
    for text in ("not json at all", "[]", ec2_event("Object Created", {}, source="aws.s3")):
        await env.clients.sqs.send_message(QueueUrl=url, MessageBody=text)
    await env.clients.sqs.send_message(
        QueueUrl=url,
        MessageBody=body("spot", "i-0000000000000000f"),  # another cluster's
    )
    ctrl = InterruptionController(claims, env.provider.unavailable, env.clock, Events())
    with structlog.testing.capture_logs() as logs:
        stats = await sqs.poll_once(env.clients.sqs, url, ctrl.handle, ctrl.log, wait_seconds=0)
    assert (stats.received, stats.malformed, stats.handled, stats.deleted) == (4, 2, 2, 4)
    assert sum(1 for e in logs if e["event"] == "dropping malformed interruption message") == 2
    assert claims.deleted == []
    assert await queue_depth(env, url) == 0


@pytest.mark.asyncio
async def test_handler_failure_leaves_message_for_redelivery(env: Env, cluster: str) -> None:
    """When deleting the claim fails, the message stays in the queue to be retried."""
    url, claims, launched = await setup(env, cluster, "on-demand")
    claims.fail_next_delete = True
    instance_id = launched.provider_id.rsplit("/", 1)[1]
    await env.clients.sqs.send_message(QueueUrl=url, MessageBody=body("stopping", instance_id))
    ctrl = InterruptionController(claims, env.provider.unavailable, env.clock, Events())
    stats = await sqs.poll_once(env.clients.sqs, url, ctrl.handle, ctrl.log, wait_seconds=0)
    assert (stats.failed, stats.deleted) == (1, 0)
    assert await queue_depth(env, url) == 1
    assert claims.deleted == []


@pytest.mark.asyncio
async def test_already_deleting_claim_is_not_deleted_again(env: Env, cluster: str) -> None:
    """A claim already being deleted only gets the event."""
    url, claims, launched = await setup(env, cluster, "on-demand")
    claims.put(replace(launched, deleting=True))
    instance_id = launched.provider_id.rsplit("/", 1)[1]
    await env.clients.sqs.send_message(QueueUrl=url, MessageBody=body("terminated", instance_id))
    ctrl = InterruptionController(claims, env.provider.unavailable, env.clock, Events())
    await sqs.poll_once(env.clients.sqs, url, ctrl.handle, ctrl.log, wait_seconds=0)
    assert claims.deleted == [] and await queue_depth(env, url) == 0


class Stop(Exception):
    """Ends the poll loop from inside the injected sleep."""


@pytest.mark.asyncio
async def test_poll_loop_backs_off_on_errors(env: Env, cluster: str) -> None:
    """An unreachable queue is logged and retried after 1s, 2s, 4s, ... (injected sleep)."""
    url = (await env.clients.sqs.create_queue(QueueName=cluster))["QueueUrl"]
    await env.clients.sqs.delete_queue(QueueUrl=url)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise Stop

    ctrl = InterruptionController(Claims(), env.provider.unavailable, env.clock, Events())
    with structlog.testing.capture_logs() as logs, pytest.raises(Stop):
        await sqs.poll_interruptions(env.clients.sqs, url, ctrl.handle, ctrl.log, sleep, 0)
    assert slept == [1.0, 2.0, 4.0]
    assert [e["event"] for e in logs].count("receiving interruption messages failed") == 3
