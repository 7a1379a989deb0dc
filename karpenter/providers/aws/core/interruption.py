"""Interruption messages: EventBridge JSON from the SQS queue → typed messages → actions.

Routing is by (``version``, ``source``, ``detail-type``) as upstream: spot interruption
warnings, rebalance recommendations, AWS Health scheduled changes, instance state changes and
capacity-reservation interruptions. Anything else parses to ``NoOp`` (deleted, no action);
undecodable bodies raise ``MessageError`` (the poller logs and deletes them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

SPOT_INTERRUPTED = "spot_interrupted"
REBALANCE = "rebalance_recommendation"
SCHEDULED_CHANGE = "scheduled_change"
INSTANCE_STOPPED = "instance_stopped"
INSTANCE_TERMINATED = "instance_terminated"
CAPACITY_RESERVATION_INTERRUPTED = "capacity_reservation_interrupted"
NOOP = "no_op"

ACTION_DELETE = "delete"  # cordon and drain: delete the NodeClaim
ACTION_NONE = "none"  # an event only

_STATE_KINDS = {
    "stopping": INSTANCE_STOPPED,
    "stopped": INSTANCE_STOPPED,
    "shutting-down": INSTANCE_TERMINATED,
    "terminated": INSTANCE_TERMINATED,
}
_EVENTS = {
    SPOT_INTERRUPTED: ("SpotInterrupted", "Spot interruption warning was triggered"),
    REBALANCE: ("SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered"),
    SCHEDULED_CHANGE: ("InstanceUnhealthy", "An unhealthy warning was triggered for the instance"),
    INSTANCE_STOPPED: ("InstanceStopping", "Instance is stopping"),
    INSTANCE_TERMINATED: ("InstanceTerminating", "Instance is terminating"),
    CAPACITY_RESERVATION_INTERRUPTED: (
        "CapacityReservationInstanceInterrupted",
        "Capacity reservation interruption warning was triggered",
    ),
}


class MessageError(ValueError):
    """The body is not an EventBridge event Karpenter can read."""


@dataclass(frozen=True, slots=True)
class Message:
    """A parsed message: its kind, the instances it names, when it happened."""

    kind: str
    instance_ids: tuple[str, ...]
    event_id: str = ""
    time: str = ""
    detail_type: str = ""

    @property
    def action(self) -> str:
        """What the controller does: delete the instances' NodeClaims, or only record it."""
        return ACTION_NONE if self.kind in (REBALANCE, NOOP) else ACTION_DELETE

    @property
    def marks_spot_unavailable(self) -> bool:
        """Spot interruptions also hide the spot offering (type, zone) for a while."""
        return self.kind == SPOT_INTERRUPTED

    def event(self) -> tuple[str, str]:
        """(reason, message) of the Kubernetes event upstream emits for this kind."""
        return _EVENTS.get(self.kind, ("", ""))


def _detail_instance(detail: dict[str, object]) -> tuple[str, ...]:
    value = detail.get("instance-id")
    if not isinstance(value, str) or not value:
        raise MessageError("detail.instance-id: missing")
    return (value,)


def _health(detail: dict[str, object]) -> tuple[str, tuple[str, ...]]:
    if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
        return NOOP, ()
    entities = detail.get("affectedEntities")
    ids = tuple(
        str(e["entityValue"])
        for e in (entities if isinstance(entities, list) else [])
        if isinstance(e, dict) and isinstance(e.get("entityValue"), str)
    )
    return SCHEDULED_CHANGE, ids


def _route(
    source: object, detail_type: object, detail: dict[str, object]
) -> tuple[str, tuple[str, ...]]:
    if source == "aws.health" and detail_type == "AWS Health Event":
        return _health(detail)
    if source != "aws.ec2":
        return NOOP, ()
    if detail_type == "EC2 Spot Instance Interruption Warning":
        return SPOT_INTERRUPTED, _detail_instance(detail)
    if detail_type == "EC2 Instance Rebalance Recommendation":
        return REBALANCE, _detail_instance(detail)
    if detail_type == "EC2 Capacity Reservation Instance Interruption Warning":
        return CAPACITY_RESERVATION_INTERRUPTED, _detail_instance(detail)
    if detail_type == "EC2 Instance State-change Notification":
        kind = _STATE_KINDS.get(str(detail.get("state", "")))
        return (kind, _detail_instance(detail)) if kind else (NOOP, ())
    return NOOP, ()


def parse(body: str) -> Message:
    """Parse an SQS body (raises MessageError when it is not a JSON event object)."""
    try:
        doc = json.loads(body)
    except ValueError as err:
        raise MessageError(f"not JSON: {err}") from None
    except RecursionError:
        # nested deeper than the parser goes: without this the poison message escaped the
        # poller, was never deleted and came back forever
        raise MessageError("not JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise MessageError("not a JSON object")
    if doc.get("version") != "0":
        return Message(NOOP, (), str(doc.get("id", "")))
    detail = doc.get("detail")
    if not isinstance(detail, dict):
        raise MessageError("detail: missing")
    kind, ids = _route(doc.get("source"), doc.get("detail-type"), detail)
    return Message(
        kind, ids, str(doc.get("id", "")), str(doc.get("time", "")), str(doc.get("detail-type", ""))
    )
