"""The repack ratchet: a repack starts only from a fleet cheaper than the last repack started from.

A repack plans where the evicted pods go, but the kube-scheduler places them. When it places
them otherwise and some find no room, the provisioner buys nodes for them, and those nodes can
cost as much as the repack saved: the fleet is as dear and as fragmented as before, the next
repack finds the same saving, and the cycle evicts pods for nothing (seen on kwok before a
repack had to save 5% of what it removes). So each started repack records the fleet's price at
its decision (``started``), and a later repack is considered only while the fleet costs less
than that (``allows``): a repack that paid leaves the fleet cheaper and the next one is free to
go, one that did not blocks the method until the fleet gets cheaper by other means. The price
is the fleet as it will be (``planner.fleet_price(staying=True)``): nodes a started command
still holds beside their replacements would make every fleet look dearer until they are gone.

The record lapses after ``HOLD_S``: a fleet that grew with its workload since is a different
fleet, and repack must be able to act on it again; at worst a cycle then costs one repack per
``HOLD_S``. Only repack is held; every other method decides as usual.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HOLD_S = 600.0
# Prices within this ($/h) are the same fleet (sums of float prices differ in the last bits).
EPSILON = 1e-6


@dataclass(slots=True)
class RepackRatchet:
    """The fleet price ($/h) the last started repack was decided at, and when it started."""

    price: float = math.inf
    since: float = -math.inf

    def holding(self, now: float) -> bool:
        """Whether the last started repack's price still bounds the next (``allows`` is true
        for any price otherwise, so the caller need not price the fleet)."""
        return now - self.since < HOLD_S

    def allows(self, price: float, now: float) -> bool:
        """Whether a repack may be considered on a fleet costing ``price`` at ``now``."""
        return not self.holding(now) or price < self.price - EPSILON

    def started(self, price: float, now: float) -> None:
        """A repack decided on a fleet costing ``price`` started at ``now``."""
        self.price, self.since = price, now
