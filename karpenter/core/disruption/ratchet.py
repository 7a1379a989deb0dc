"""The repack ratchet: a re-plan starts only from a fleet cheaper than the last one started from.

A re-plan moves many pods at once to where a plan put them: the repack method, and splits
(a consolidation whose candidates' pods need more than one replacement, ``split``). The plan
says where the evicted pods go, but the kube-scheduler places them. When it places them
otherwise and some find no room, the provisioner buys nodes for them, and those nodes can cost
as much as the re-plan saved: the fleet is as dear and as fragmented as before, the next
re-plan finds the same saving, and the cycle evicts pods for nothing (seen on kwok: basic's
repacks before a repack had to save 5% of what it removes; upstream's wide scale-down, 30
zone-spread Deployments, where 8-node splits into 7 replacements left 1-8 pods a round for
the provisioner and the fleet stayed at 123 nodes for ten minutes). So each started re-plan
records the fleet's price at its decision (``started``), and a later one is considered only
while the fleet costs less than that (``allows``): a re-plan that paid leaves the fleet cheaper
and the next one is free to go, one that did not blocks both methods until the fleet gets
cheaper by other means. The price is the fleet as it will be
(``planner.fleet_price(staying=True)``): nodes a started command still holds beside their
replacements would make every fleet look dearer until they are gone.

The record lapses after ``HOLD_S``: a fleet that grew with its workload since is a different
fleet, and re-plans must be able to act on it again; at worst a cycle then costs one re-plan
per ``HOLD_S``. Only re-plans are held; every other command (deletes, one-for-one
replacements, drift, expiration) decides as usual.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from karpenter.core.disruption.commands import METHOD_MULTI, METHOD_REPACK, METHOD_SINGLE, Command
from karpenter.core.model.cluster import Options

HOLD_S = 600.0
# Prices within this ($/h) are the same fleet (sums of float prices differ in the last bits).
EPSILON = 1e-6


def replans(command: Command) -> bool:
    """Whether ``command`` is a re-plan: a repack, or a consolidation split into several
    replacements (a drift's or an expiry's replacements are forced, not a plan's choice)."""
    if command.method == METHOD_REPACK:
        return True
    return command.method in (METHOD_MULTI, METHOD_SINGLE) and len(command.replacements) > 1


def may_replan(options: Options) -> bool:
    """Whether ``options`` let the core decide re-plans at all."""
    return options.repack_consolidation or options.max_replacements > 1


def without_replans(options: Options) -> Options:
    """``options`` with re-plans left out: no repack, one replacement at most."""
    return replace(options, repack_consolidation=False, max_replacements=1)


@dataclass(slots=True)
class RepackRatchet:
    """The fleet price ($/h) the last started re-plan was decided at, and when it started."""

    price: float = math.inf
    since: float = -math.inf

    def holding(self, now: float) -> bool:
        """Whether the last started re-plan's price still bounds the next (``allows`` is true
        for any price otherwise, so the caller need not price the fleet)."""
        return now - self.since < HOLD_S

    def allows(self, price: float, now: float) -> bool:
        """Whether a re-plan may be considered on a fleet costing ``price`` at ``now``."""
        return not self.holding(now) or price < self.price - EPSILON

    def started(self, price: float, now: float) -> None:
        """A re-plan decided on a fleet costing ``price`` started at ``now``."""
        self.price, self.since = price, now
