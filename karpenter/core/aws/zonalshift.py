"""ARC zonal shift: which availability zones (by zone id) traffic is shifted away from.

With ``ENABLE_ZONAL_SHIFT`` the provider polls ARC's view of the cluster every 30s. A zone
whose shift is *applied* and not yet expired is "shifted": its offerings are unavailable (no
launches there) and instances in it are not terminated by the provider, as upstream.

Upstream's bookkeeping is kept: an answer with no shifts forgets everything; otherwise each
reported zone's entry is replaced and zones not reported keep their entry until it expires.
Autoshifts carry no expiry; they count as shifted for 24 hours from the poll that saw them,
so each poll that still reports one extends it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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
