"""The EC2NodeClass ``status`` block: core Status ↔ the CRD's JSON (subnets, AMIs, conditions).

``placementGroups`` holds the one group ``placementGroupSelector`` resolved to.
"""

from __future__ import annotations

from typing import Any

from karpenter.providers.aws.api import ec2nodeclass_reservations as reservations
from karpenter.providers.aws.core import nodeclass as nc


def status_doc(status: nc.Status, transition_time: str) -> dict[str, Any]:
    """``status`` as the CRD stores it (conditions stamped with ``transition_time``)."""
    return {
        "subnets": [{"id": s.id, "zone": s.zone, "zoneID": s.zone_id} for s in status.subnets],
        "securityGroups": [{"id": g.id, "name": g.name} for g in status.security_groups],
        "amis": [
            {
                "id": a.id,
                "name": a.name,
                **({"deprecated": True} if a.deprecated else {}),
                "requirements": [
                    {"key": k, "operator": op, **({"values": list(v)} if v else {})}
                    for k, op, v in a.requirements
                ],
            }
            for a in status.amis
        ],
        "instanceProfile": status.instance_profile,
        # always written: the status is merge-patched, and an absent key would keep a stale group
        "placementGroups": [_placement_doc(g) for g in status.placement_groups],
        "capacityReservations": reservations.status_doc(status.capacity_reservations),
        "conditions": [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason or c.type,
                "message": c.message,
                "lastTransitionTime": transition_time,
            }
            for c in status.conditions
        ],
    }


def _placement_doc(group: nc.PlacementGroup) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": group.id,
        "name": group.name,
        "strategy": group.strategy,
        "state": group.state,
    }
    if group.partition_count:
        doc["partitionCount"] = group.partition_count
    if group.spread_level:
        doc["spreadLevel"] = group.spread_level
    return doc


def _placement(raw: dict[str, Any]) -> nc.PlacementGroup:
    count = raw.get("partitionCount", 0)
    return nc.PlacementGroup(
        str(raw.get("id", "")),
        str(raw.get("name", "")),
        str(raw.get("strategy", "")),
        str(raw.get("state", "")),
        count if isinstance(count, int) else 0,
        str(raw.get("spreadLevel", "") or ""),
    )


def _requirements(raw: Any) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    return tuple(
        (
            str(r.get("key", "")),
            str(r.get("operator", "")),
            tuple(str(v) for v in r.get("values") or ()),
        )
        for r in raw or ()
        if isinstance(r, dict)
    )


def status_from_doc(raw: Any) -> nc.Status:
    """``status`` as stored (the inverse of ``status_doc``); missing parts read as empty."""
    if not isinstance(raw, dict):
        return nc.Status()

    def items(key: str) -> list[dict[str, Any]]:
        value = raw.get(key)
        return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []

    return nc.Status(
        tuple(
            nc.Subnet(str(i.get("id", "")), str(i.get("zone", "")), str(i.get("zoneID", "")))
            for i in items("subnets")
        ),
        tuple(
            nc.SecurityGroup(str(i.get("id", "")), str(i.get("name", "")))
            for i in items("securityGroups")
        ),
        tuple(
            nc.AMI(
                str(i.get("id", "")),
                str(i.get("name", "")),
                bool(i.get("deprecated", False)),
                _requirements(i.get("requirements")),
            )
            for i in items("amis")
        ),
        str(raw.get("instanceProfile", "") or ""),
        tuple(
            nc.Condition(
                str(i.get("type", "")),
                str(i.get("status", "")),
                str(i.get("reason", "")),
                str(i.get("message", "")),
            )
            for i in items("conditions")
        ),
        tuple(_placement(i) for i in items("placementGroups")),
        reservations.status_from_doc(raw.get("capacityReservations")),
    )
