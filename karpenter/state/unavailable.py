"""Offerings the cloud recently refused for lack of capacity, remembered for a while.

When a launch fails with insufficient capacity the lifecycle controller records the refused
(instance type, zone, capacity type) offerings here; the provisioner marks them unavailable in
the instance types it hands the solver, so the next pass picks something else instead of
retrying the same empty pool. Entries expire after 3 minutes (the AWS provider's ICE cache
TTL), because capacity comes back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from karpenter.core.model.instancetype import InstanceType

DEFAULT_TTL_S = 180.0

Key = tuple[str, str, str]  # (instance type, zone, capacity type)


class UnavailableOfferings:
    """A TTL set of offerings; time is passed in (the mirror never reads a clock)."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._until: dict[Key, float] = {}

    def mark(self, instance_type: str, zone: str, capacity_type: str, now: float) -> None:
        """Remember one refused offering until ``now + ttl``."""
        self._until[(instance_type, zone, capacity_type)] = now + self.ttl_s

    def active(self, now: float) -> set[Key]:
        """The offerings still considered unavailable (expired ones are forgotten)."""
        self._until = {k: t for k, t in self._until.items() if t > now}
        return set(self._until)

    def apply(self, types: Sequence[InstanceType], now: float) -> tuple[InstanceType, ...]:
        """``types`` with every remembered offering switched to unavailable."""
        gone = self.active(now)
        if not gone:
            return tuple(types)
        return tuple(self._apply_one(it, gone) for it in types)

    @staticmethod
    def _apply_one(it: InstanceType, gone: set[Key]) -> InstanceType:
        if not any((it.name, o.zone, o.capacity_type) in gone for o in it.offerings):
            return it
        offerings = tuple(
            dataclasses.replace(o, available=False)
            if (it.name, o.zone, o.capacity_type) in gone
            else o
            for o in it.offerings
        )
        return dataclasses.replace(it, offerings=offerings)
