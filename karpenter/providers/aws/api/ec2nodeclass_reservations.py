"""``spec.capacityReservationSelectorTerms`` and ``status.capacityReservations`` of an EC2NodeClass.

The term's rules are the CRD's (id pattern, 12-digit owner, match criteria enum, ``id``
exclusive with the other fields, at least one of tags / id / instanceMatchCriteria), with the
same messages. Status entries carry times as RFC 3339, as the CRD stores them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from karpenter.api import crdfields as f
from karpenter.providers.aws.core import reservations as rsv


class CapacityReservationTerm(f.Model):
    """One selector term."""

    id: str | None = Field(default=None, pattern=r"^cr-[0-9a-z]+$")
    owner_id: str | None = Field(default=None, alias="ownerID", pattern=r"^[0-9]{12}$")
    tags: dict[str, str] | None = Field(default=None, max_length=20)
    instance_match_criteria: Literal["open", "targeted"] | None = Field(
        default=None, alias="instanceMatchCriteria"
    )

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and any(not k or not v for k, v in value.items()):
            raise ValueError("empty tag keys or values aren't supported")
        return value

    @model_validator(mode="after")
    def _one(self) -> CapacityReservationTerm:
        if self.tags is None and self.id is None and self.instance_match_criteria is None:
            raise ValueError(
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"
            )
        others = (self.tags, self.owner_id, self.instance_match_criteria)
        if self.id is not None and any(o is not None for o in others):
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields "
                "in a capacity reservation selector term"
            )
        return self

    def to_core(self) -> rsv.SelectorTerm:
        """The core term."""
        return rsv.SelectorTerm(
            self.id or "",
            self.owner_id or "",
            dict(self.tags or {}),
            self.instance_match_criteria or "",
        )


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_doc(found: tuple[rsv.CapacityReservation, ...]) -> list[dict[str, Any]]:
    """``status.capacityReservations`` entries, by id."""
    out = []
    for r in sorted(found, key=lambda r: r.id):
        item: dict[str, Any] = {
            "id": r.id,
            "availabilityZone": r.zone,
            "instanceType": r.instance_type,
            "ownerID": r.owner_id,
            "instanceMatchCriteria": r.instance_match_criteria,
            "reservationType": r.reservation_type,
            "state": r.state,
        }
        if r.end_time is not None:
            item["endTime"] = _stamp(r.end_time)
        out.append(item)
    return out


def _epoch(raw: object) -> float | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def status_from_doc(raw: object) -> tuple[rsv.CapacityReservation, ...]:
    """The stored entries (the inverse of ``status_doc``); malformed entries are skipped."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        rsv.CapacityReservation(
            str(i["id"]),
            str(i.get("instanceType", "")),
            str(i.get("availabilityZone", "")),
            str(i.get("ownerID", "")),
            str(i.get("instanceMatchCriteria", "targeted")),
            str(i.get("reservationType", rsv.TYPE_DEFAULT)),
            _epoch(i.get("endTime")),
            str(i.get("state", rsv.STATE_ACTIVE)),
        )
        for i in raw
        if isinstance(i, dict) and i.get("id")
    )
