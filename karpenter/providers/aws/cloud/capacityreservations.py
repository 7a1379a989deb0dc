"""Capacity reservation discovery: an EC2NodeClass's selector terms → DescribeCapacityReservations.

All ``id`` terms share one query by id; every other term is one query whose filters are its
owner, match criteria and tags. Only active reservations are asked for, and one whose end has
passed is dropped (EC2 flips the state a little after the end). A reservation with a match
criteria or type this controller does not know is skipped rather than guessed at. Each call
also reports every reservation's ``AvailableInstanceCount``, which seeds the provider's
availability ledger. An id that does not exist selects nothing (EC2 fails a whole id query
for it, so the ids are then asked one by one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import reservations as rsv


@dataclass(frozen=True, slots=True)
class Found:
    """What one discovery found: the reservations and how many instances each can start."""

    reservations: tuple[rsv.CapacityReservation, ...]
    available: Mapping[str, int]


def _tag_filters(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    # the subnet/security-group rule (resolve.tag_filters), kept here as resolve imports us
    return [
        {"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]}
        for k, v in sorted(tags.items())
    ]


def queries(terms: Sequence[rsv.SelectorTerm]) -> list[dict[str, Any]]:
    """The DescribeCapacityReservations inputs for the terms (each only active ones)."""
    active = {"Name": "state", "Values": ["active"]}
    out: list[dict[str, Any]] = []
    ids = sorted({t.id for t in terms if t.id})
    if ids:
        # EC2 pages only filter queries; a query by ids answers them all at once
        out.append({"CapacityReservationIds": ids, "Filters": [active]})
    for term in terms:
        if term.id:
            continue
        filters: list[dict[str, Any]] = [active]
        if term.owner_id:
            filters.append({"Name": "owner-id", "Values": [term.owner_id]})
        if term.instance_match_criteria:
            filters.append(
                {"Name": "instance-match-criteria", "Values": [term.instance_match_criteria]}
            )
        filters.extend(_tag_filters(term.tags))
        out.append({"Filters": filters, "MaxResults": 1000})
    return out


def _epoch(value: object) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


def parse(raw: Mapping[str, Any], now: float) -> rsv.CapacityReservation | None:
    """One EC2 reservation, or None when it has ended or is of a kind not understood."""
    criteria = str(raw.get("InstanceMatchCriteria", ""))
    kind = str(raw.get("ReservationType") or rsv.TYPE_DEFAULT)
    if criteria not in rsv.MATCH_CRITERIA or kind not in rsv.TYPES:
        return None
    end = _epoch(raw.get("EndDate"))
    if end is not None and end <= now:
        return None
    return rsv.CapacityReservation(
        str(raw["CapacityReservationId"]),
        str(raw.get("InstanceType", "")),
        str(raw.get("AvailabilityZone", "")),
        str(raw.get("OwnerId", "")),
        criteria,
        kind,
        end,
        rsv.state_at(kind, end, now),
    )


async def _pages(ec2: Client, query: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    token = ""
    while True:
        page = await ec2.describe_capacity_reservations(
            **query, **({"NextToken": token} if token else {})
        )
        found.extend(page.get("CapacityReservations", []))
        token = str(page.get("NextToken") or "")
        if not token:
            return found


async def _by_ids(ec2: Client, query: dict[str, Any]) -> list[dict[str, Any]]:
    """An id query; if one id is unknown EC2 fails the lot, so ask id by id, skipping it."""
    try:
        return await _pages(ec2, query)
    except Exception as err:
        if not errors.is_not_found(err):
            raise
    found = []
    for rid in query["CapacityReservationIds"]:
        try:
            found.extend(await _pages(ec2, {**query, "CapacityReservationIds": [rid]}))
        except Exception as err:
            if not errors.is_not_found(err):
                raise
    return found


async def discover(ec2: Client, terms: Sequence[rsv.SelectorTerm], now: float) -> Found:
    """Every reservation the terms select (by id), with their available counts."""
    found: dict[str, rsv.CapacityReservation] = {}
    available: dict[str, int] = {}
    for query in queries(terms):
        raws = await (
            _by_ids(ec2, query) if "CapacityReservationIds" in query else _pages(ec2, query)
        )
        for raw in raws:
            parsed = parse(raw, now)
            if parsed is not None:
                found[parsed.id] = parsed
                available[parsed.id] = int(raw.get("AvailableInstanceCount", 0))
    ordered = tuple(sorted(found.values(), key=lambda r: r.id))
    return Found(ordered, available)
