"""ARC zonal shift: which availability zones (by zone id) traffic is shifted away from.

With ``ENABLE_ZONAL_SHIFT`` the provider polls ARC's view of the cluster every 30s. A zone
whose shift is *applied* and not yet expired is "shifted": its offerings are unavailable (no
launches there) and instances in it are not terminated by the provider, as upstream.

Upstream's bookkeeping is kept: an answer with no shifts forgets everything; otherwise each
reported zone's entry is replaced and zones not reported keep their entry until it expires.
Autoshifts carry no expiry; they count as shifted for 24 hours from the poll that saw them,
so each poll that still reports one extends it.

``events`` says which NodePools hear about a change: a Warning ``ZonalShiftActive`` when a
zone becomes shifted, a Normal ``ZonalShiftCleared`` when it stops, for every NodePool whose
NodeClass has a subnet in the zone and whose requirements allow it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.scheduling.requirements import Requirements

POLL_SECONDS = 30.0
AUTOSHIFT_HORIZON_SECONDS = 24 * 3600.0
APPLIED = "APPLIED"


@dataclass(frozen=True, slots=True)
class Shift:
    """One shift away from a zone id: until when, and whether ARC has applied it."""

    zone_id: str
    expiry: float
    applied: bool


@dataclass(frozen=True, slots=True)
class ZonalShifts:
    """The shifts known from the last polls, by zone id."""

    by_zone: Mapping[str, Shift] = field(default_factory=dict)

    def update(self, shifts: Iterable[Shift]) -> ZonalShifts:
        """The state after a poll that reported ``shifts``."""
        reported = {s.zone_id: s for s in shifts}
        if not reported:
            return ZonalShifts()
        return ZonalShifts({**self.by_zone, **reported})

    def shifted(self, now: float) -> frozenset[str]:
        """Zone ids with an applied, unexpired shift at ``now``."""
        return frozenset(z for z, s in self.by_zone.items() if s.applied and s.expiry > now)


def autoshift(zone_id: str, applied_status: str, now: float) -> Shift:
    """An autoshift as a shift (see the module docstring for its horizon)."""
    return Shift(zone_id, now + AUTOSHIFT_HORIZON_SECONDS, applied_status == APPLIED)


@dataclass(frozen=True, slots=True)
class PoolView:
    """A NodePool as the events need it: its requirements and its NodeClass's zones."""

    name: str
    requirements: Requirements
    zones: Mapping[str, str]  # zone id → zone name, from the NodeClass's subnets


@dataclass(frozen=True, slots=True)
class Event:
    """One Event to post on a NodePool."""

    nodepool: str
    type: str
    reason: str
    message: str


def events(before: frozenset[str], after: frozenset[str], pools: Sequence[PoolView]) -> list[Event]:
    """The Events for a change of shifted zone ids, NodePools in name order."""
    out = []
    for pool in sorted(pools, key=lambda p: p.name):
        allowed = pool.requirements.get_or_exists(lbl.ZONE)
        for zone_id in sorted(before ^ after):
            zone = pool.zones.get(zone_id)
            if zone is None or not allowed.has(zone):
                continue
            if zone_id in after:
                what = f"Zonal shift detected: offerings in zone {zone} ({zone_id}) are unavailable"
                out.append(Event(pool.name, "Warning", "ZonalShiftActive", what + FOR_POOL))
            else:
                what = f"Zonal shift cleared: offerings in zone {zone} ({zone_id}) are restored"
                out.append(Event(pool.name, "Normal", "ZonalShiftCleared", what + FOR_POOL))
    return out


FOR_POOL = " for this NodePool"
