"""Unavailable offerings: the insufficient-capacity memory that steers the next launch.

An ICE for (capacity type, instance type, zone) hides that offering for 3 minutes; an ICE met
inside a placement group is kept under a scope (``<pg>`` or ``<pg>:<partition>``), so only
launches into that group avoid it (a full group says nothing about the zone). A failure
for a whole capacity type (spot service-linked role missing) hides every offering of it. The
caller passes ``now`` in every call, so the cache reads no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TTL_SECONDS = 180.0


@dataclass(slots=True)
class UnavailableOfferings:
    """Expiry times by key ``<capacity>:<type>:<zone>[:<scope>]`` and by capacity type."""

    ttl: float = TTL_SECONDS
    _offerings: dict[str, float] = field(default_factory=dict)
    _capacity_types: dict[str, float] = field(default_factory=dict)
    seq: int = 0  # bumps on every change, so catalogs built earlier know to rebuild

    @staticmethod
    def key(capacity_type: str, instance_type: str, zone: str, scope: str = "") -> str:
        """Upstream's key layout (``scope``: a placement group id, optionally ``:<partition>``)."""
        base = f"{capacity_type}:{instance_type}:{zone}"
        return f"{base}:{scope}" if scope else base

    def mark(
        self, capacity_type: str, instance_type: str, zone: str, now: float, scope: str = ""
    ) -> None:
        """Hide one offering until ``now + ttl`` (only for launches in ``scope`` if given)."""
        self._offerings[self.key(capacity_type, instance_type, zone, scope)] = now + self.ttl
        self.seq += 1

    def mark_capacity_type(self, capacity_type: str, now: float) -> None:
        """Hide every offering of a capacity type until ``now + ttl``."""
        self._capacity_types[capacity_type] = now + self.ttl
        self.seq += 1

    def is_unavailable(
        self, capacity_type: str, instance_type: str, zone: str, now: float, scope: str = ""
    ) -> bool:
        """True while the offering (or its whole capacity type) is hidden; with a scope, a
        mark in that scope hides it too."""
        until = self._capacity_types.get(capacity_type)
        if until is not None and until > now:
            return True
        keys = [self.key(capacity_type, instance_type, zone)]
        if scope:
            keys.append(self.key(capacity_type, instance_type, zone, scope))
        return any((t := self._offerings.get(k)) is not None and t > now for k in keys)

    def active(self, now: float) -> frozenset[str]:
        """Keys hidden at ``now`` (capacity types as ``<type>:*``): a cache key for catalogues."""
        hidden = {k for k, until in self._offerings.items() if until > now}
        hidden |= {f"{k}:*" for k, until in self._capacity_types.items() if until > now}
        return frozenset(hidden)

    def cleanup(self, now: float) -> None:
        """Forget expired entries (upstream runs this every 10s)."""
        for table in (self._offerings, self._capacity_types):
            for key in [k for k, until in table.items() if until <= now]:
                del table[key]
