"""Interruption message parsing: every EventBridge kind upstream handles, and junk."""

from __future__ import annotations

import json

import pytest

from karpenter.providers.aws.core import interruption as intr


def event(source: str, detail_type: str, detail: dict[str, object]) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "e-1",
            "detail-type": detail_type,
            "source": source,
            "account": "123456789012",
            "time": "2026-11-23T10:00:00Z",
            "region": "us-east-1",
            "resources": [],
            "detail": detail,
        }
    )


SPOT = event(
    "aws.ec2",
    "EC2 Spot Instance Interruption Warning",
    {"instance-id": "i-1", "instance-action": "terminate"},
)
REBALANCE = event("aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": "i-1"})
HEALTH = event(
    "aws.health",
    "AWS Health Event",
    {
        "service": "EC2",
        "eventTypeCategory": "scheduledChange",
        "affectedEntities": [{"entityValue": "i-1"}, {"entityValue": "i-2"}],
    },
)


def state(value: str) -> str:
    return event(
        "aws.ec2", "EC2 Instance State-change Notification", {"instance-id": "i-1", "state": value}
    )


@pytest.mark.parametrize(
    ("body", "kind", "ids", "action"),
    [
        pytest.param(SPOT, intr.SPOT_INTERRUPTED, ("i-1",), "delete", id="spot"),
        pytest.param(REBALANCE, intr.REBALANCE, ("i-1",), "none", id="rebalance"),
        pytest.param(
            HEALTH, intr.SCHEDULED_CHANGE, ("i-1", "i-2"), "delete", id="scheduled-change"
        ),
        pytest.param(state("stopping"), intr.INSTANCE_STOPPED, ("i-1",), "delete", id="stopping"),
        pytest.param(state("stopped"), intr.INSTANCE_STOPPED, ("i-1",), "delete", id="stopped"),
        pytest.param(
            state("shutting-down"), intr.INSTANCE_TERMINATED, ("i-1",), "delete", id="shutting-down"
        ),
        pytest.param(
            state("terminated"), intr.INSTANCE_TERMINATED, ("i-1",), "delete", id="terminated"
        ),
        pytest.param(state("running"), intr.NOOP, (), "none", id="running-ignored"),
        pytest.param(
            event(
                "aws.ec2",
                "EC2 Capacity Reservation Instance Interruption Warning",
                {"instance-id": "i-1"},
            ),
            intr.CAPACITY_RESERVATION_INTERRUPTED,
            ("i-1",),
            "delete",
            id="capacity-reservation",
        ),
        pytest.param(
            event(
                "aws.health",
                "AWS Health Event",
                {"service": "RDS", "eventTypeCategory": "scheduledChange"},
            ),
            intr.NOOP,
            (),
            "none",
            id="health-not-ec2",
        ),
        pytest.param(event("aws.s3", "Object Created", {}), intr.NOOP, (), "none", id="foreign"),
        pytest.param('{"version": "1", "detail": {}}', intr.NOOP, (), "none", id="other-version"),
    ],
)
def test_kinds_and_actions(body: str, kind: str, ids: tuple[str, ...], action: str) -> None:
    """Each kind parses to upstream's kind, instance ids and action."""
    msg = intr.parse(body)
    assert (msg.kind, msg.instance_ids, msg.action) == (kind, ids, action)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="not-object"),
        pytest.param('{"version": "0", "source": "aws.ec2"}', id="no-detail"),
        pytest.param(
            event("aws.ec2", "EC2 Spot Instance Interruption Warning", {}), id="no-instance"
        ),
    ],
)
def test_malformed(body: str) -> None:
    """Malformed bodies raise MessageError (the poller deletes them)."""
    with pytest.raises(intr.MessageError):
        intr.parse(body)


def test_spot_marks_offering_and_event() -> None:
    """Only spot interruptions hide the spot offering; events use upstream's reasons."""
    assert intr.parse(SPOT).marks_spot_unavailable
    assert not intr.parse(HEALTH).marks_spot_unavailable
    assert intr.parse(SPOT).event()[0] == "SpotInterrupted"
