"""Capacity reservations for the moto proxy: moto 5.2.1 has no capacity reservation API.

The test holds the reservations (``Reservations.held``); the proxy in ``conftest`` asks this
module what EC2 would do with four kinds of request:

- DescribeCapacityReservations is answered here, never forwarded: ids and the filters the
  provider sends (state, owner-id, instance-match-criteria, tag:<k>, tag-key) select from the
  held reservations, and the answer is EC2's query-protocol XML (a ``capacityReservationSet``
  of items named as EC2's API reference names the fields), which botocore parses like any
  EC2 answer. An unknown id fails the call with ``InvalidCapacityReservationId.NotFound``.
- CreateLaunchTemplate passes through to moto (which stores the data as given); the proxy
  notes which reservation a template targets
  (``CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId``).
- CreateFleet: configs whose template targets a full reservation have their overrides dropped
  with ``ReservationCapacityExceeded`` (the conftest's ICE mechanism), a
  ``capacity-block`` fleet is forwarded as ``on-demand`` (moto only launches on-demand and
  spot), and after moto answers, each instance launched in a pool of a reservation's
  template takes one unit of its ``available`` count, as EC2's ``AvailableInstanceCount``
  would drop.
- DescribeInstances passes through; in moto's answer the instances launched into a
  reservation get the ``capacityReservationId`` and ``capacityReservationSpecification``
  (``capacity-reservations-only`` plus the target) EC2 reports for them. ``end(rid)`` models a
  reservation that ended: it is no longer described and its instances report neither field,
  running on as plain on-demand instances, as EC2 keeps them.
"""

from __future__ import annotations

import collections
import datetime as dt
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

ACCOUNT = "123456789012"
_TARGET = (
    "LaunchTemplateData.CapacityReservationSpecification.CapacityReservationTarget."
    "CapacityReservationId"
)


@dataclass
class Reservation:
    """One reservation the test holds."""

    id: str
    instance_type: str
    zone: str
    available: int
    total: int = 0
    owner_id: str = ACCOUNT
    instance_match_criteria: str = "targeted"
    reservation_type: str = "default"
    state: str = "active"
    end: dt.datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def matches(self, name: str, values: list[str]) -> bool:
        """Whether the reservation passes one DescribeCapacityReservations filter."""
        if name.startswith("tag:"):
            return self.tags.get(name[4:]) in values
        if name == "tag-key":
            return any(v in self.tags for v in values)
        field_of = {
            "state": self.state,
            "owner-id": self.owner_id,
            "instance-match-criteria": self.instance_match_criteria,
            "instance-type": self.instance_type,
            "availability-zone": self.zone,
        }
        return field_of.get(name) in values

    def xml(self) -> str:
        """The ``capacityReservationSet`` item, in EC2's field names."""
        stamp = "%Y-%m-%dT%H:%M:%S.000Z"
        parts = [
            ("capacityReservationId", self.id),
            ("ownerId", self.owner_id),
            ("instanceType", self.instance_type),
            ("instancePlatform", "Linux/UNIX"),
            ("availabilityZone", self.zone),
            ("tenancy", "default"),
            ("totalInstanceCount", str(self.total or self.available)),
            ("availableInstanceCount", str(self.available)),
            ("state", self.state),
            ("startDate", "2026-01-01T00:00:00.000Z"),
            ("endDateType", "limited" if self.end else "unlimited"),
            ("instanceMatchCriteria", self.instance_match_criteria),
            ("reservationType", self.reservation_type),
        ]
        if self.end is not None:
            parts.append(("endDate", self.end.strftime(stamp)))
        body = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in parts)
        tags = "".join(
            f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>"
            for k, v in sorted(self.tags.items())
        )
        return f"<item>{body}<tagSet>{tags}</tagSet></item>"


def _filters(params: dict[str, str]) -> list[tuple[str, list[str]]]:
    out = []
    n = 1
    while f"Filter.{n}.Name" in params:
        values = []
        m = 1
        while f"Filter.{n}.Value.{m}" in params:
            values.append(params[f"Filter.{n}.Value.{m}"])
            m += 1
        out.append((params[f"Filter.{n}.Name"], values))
        n += 1
    return out


def _listed(params: dict[str, str], prefix: str) -> list[str]:
    out = []
    n = 1
    while f"{prefix}.{n}" in params:
        out.append(params[f"{prefix}.{n}"])
        n += 1
    return out


_NOT_FOUND = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
    "<Code>InvalidCapacityReservationId.NotFound</Code><Message>The capacity reservation "
    "ID '{rid}' does not exist</Message></Error></Errors><RequestID>r</RequestID></Response>"
)


@dataclass
class Reservations:
    """The reservations a test holds, and what the proxy saw of them."""

    held: dict[str, Reservation] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)  # template name → reservation id
    launched: collections.Counter[str] = field(default_factory=collections.Counter)
    fleet_types: list[str] = field(default_factory=list)  # DefaultTargetCapacityType as sent
    describe_calls: list[dict[str, str]] = field(default_factory=list)
    pools: dict[tuple[str, str], str] = field(default_factory=dict)  # last fleet's reserved pools
    instances: dict[str, str] = field(default_factory=dict)  # instance id → reservation id

    def add(self, *found: Reservation) -> None:
        """Hold these reservations."""
        for r in found:
            self.held[r.id] = r

    def clear(self) -> None:
        """Forget everything (each test starts empty)."""
        self.held.clear()
        self.templates.clear()
        self.launched.clear()
        self.fleet_types.clear()
        self.describe_calls.clear()
        self.pools.clear()
        self.instances.clear()

    def end(self, rid: str) -> None:
        """The reservation ended: gone from EC2, its instances on-demand from now on."""
        self.held.pop(rid, None)
        for iid in [i for i, r in self.instances.items() if r == rid]:
            del self.instances[iid]

    def after_describe_instances(self, xml: str) -> str:
        """moto's DescribeInstances answer with EC2's reservation fields on reserved instances."""
        for iid, rid in sorted(self.instances.items()):
            tag = f"<instanceId>{iid}</instanceId>"
            extra = (
                f"<capacityReservationId>{rid}</capacityReservationId>"
                "<capacityReservationSpecification><capacityReservationPreference>"
                "capacity-reservations-only</capacityReservationPreference>"
                "<capacityReservationTarget><capacityReservationId>"
                f"{rid}</capacityReservationId></capacityReservationTarget>"
                "</capacityReservationSpecification>"
            )
            xml = xml.replace(tag, tag + extra)
        return xml

    def describe(self, params: dict[str, str]) -> tuple[int, str]:
        """DescribeCapacityReservations' answer (status, XML)."""
        self.describe_calls.append(params)
        ids = _listed(params, "CapacityReservationId")
        missing = [i for i in ids if i not in self.held]
        if missing:
            return 400, _NOT_FOUND.format(rid=escape(missing[0]))
        chosen = [self.held[i] for i in ids] if ids else list(self.held.values())
        for name, values in _filters(params):
            chosen = [r for r in chosen if r.matches(name, values)]
        items = "".join(r.xml() for r in sorted(chosen, key=lambda r: r.id))
        return 200, (
            '<?xml version="1.0" encoding="UTF-8"?><DescribeCapacityReservationsResponse '
            'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId>'
            f"<capacityReservationSet>{items}</capacityReservationSet>"
            "</DescribeCapacityReservationsResponse>"
        )

    def note_template(self, params: dict[str, str]) -> None:
        """Remember which reservation a new launch template targets."""
        rid = params.get(_TARGET)
        if rid:
            self.templates[params.get("LaunchTemplateName", "")] = rid

    def fleet(
        self, params: list[tuple[str, str]]
    ) -> tuple[list[tuple[str, str]], dict[tuple[str, str], str]]:
        """A CreateFleet as moto can run it, and pools of full reservations (with their code).

        Also remembers which pools of this fleet launch into which reservation, for
        ``after_fleet`` (moto's answer does not reliably echo the template it used).
        """
        key = "TargetCapacitySpecification.DefaultTargetCapacityType"
        fleet_type = dict(params).get(key, "on-demand")
        self.fleet_types.append(fleet_type)
        if fleet_type == "capacity-block":
            params = [(k, "on-demand" if k == key else v) for k, v in params]
        config_rid: dict[str, str] = {}
        overrides: dict[tuple[str, str], dict[str, str]] = {}
        for k, v in params:
            parts = k.split(".")
            if parts[0] != "LaunchTemplateConfigs" or len(parts) < 4:
                continue
            if parts[2:] == ["LaunchTemplateSpecification", "LaunchTemplateName"]:
                if v in self.templates:
                    config_rid[parts[1]] = self.templates[v]
            elif len(parts) == 5 and parts[2] == "Overrides":
                overrides.setdefault((parts[1], parts[3]), {})[parts[4]] = v
        self.pools = {}
        full: dict[tuple[str, str], str] = {}
        for (config, _), fields in overrides.items():
            rid = config_rid.get(config)
            if rid is None:
                continue
            pool = (fields.get("InstanceType", ""), fields.get("AvailabilityZone", ""))
            held = self.held.get(rid)
            if held is None or held.available < 1:
                full[pool] = "ReservationCapacityExceeded"
            else:
                self.pools[pool] = rid
        return params, full

    def after_fleet(self, xml: str) -> None:
        """Take one unit from a reservation per instance moto launched in its pool."""
        try:
            root = ET.fromstring(xml)
        except ET.ParseError:
            return
        for elem in root.iter():
            elem.tag = elem.tag.rsplit("}", 1)[-1]  # moto's namespace differs from EC2's
        for item in root.iterfind("fleetInstanceSet/item"):
            over = item.find("launchTemplateAndOverrides/overrides")
            if over is None:
                continue
            pool = (over.findtext("instanceType", ""), over.findtext("availabilityZone", ""))
            rid = self.pools.get(pool)
            ids = [i.text or "" for i in item.findall("instanceIds/item")]
            if rid and ids:
                self.held[rid].available -= len(ids)
                self.launched[rid] += len(ids)
                self.instances.update(dict.fromkeys(ids, rid))
