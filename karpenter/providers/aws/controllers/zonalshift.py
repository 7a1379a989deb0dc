"""Zonal-shift poller: every 30s, ARC's shifts for the cluster into the provider.

The provider turns shifted zone ids into unavailable offerings and refuses terminations there
(``aws/core/zonalshift.py``). A failed poll keeps the last known shifts, which expire on their
own. Changes are logged, and posted as ``ZonalShiftActive`` / ``ZonalShiftCleared`` Events on
the NodePools that could launch in the zone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog

from karpenter.providers.aws.cloud import zonalshift as arc
from karpenter.providers.aws.core import zonalshift
from karpenter.providers.aws.core.zonalshift import ZonalShifts


class Shifted(Protocol):
    """Holds the zonal shifts (the AWS provider)."""

    zonal_shifts: ZonalShifts


class Audience(Protocol):
    """The NodePools that hear about shifts, and where their Events go."""

    async def pools(self) -> list[zonalshift.PoolView]:
        """Every NodePool with its requirements and its NodeClass's zones."""
        ...

    async def publish(self, event: zonalshift.Event) -> None:
        """Post one Event on its NodePool."""
        ...


class ZonalShiftPoller:
    """``reconcile()`` polls once and returns seconds until the next poll."""

    def __init__(
        self,
        target: Shifted,
        arc_client: Any,
        cluster_arn: str,
        now: Callable[[], float],
        audience: Audience | None = None,
        log: Any = None,
    ) -> None:
        self.target = target
        self.audience = audience
        self.arc = arc_client
        self.cluster_arn = cluster_arn
        self.now = now
        self.log = log or structlog.get_logger().bind(controller="providers.zonalshift")

    async def reconcile(self) -> float:
        """One poll; shifted zones that appear or disappear are logged."""
        now = self.now()
        before = self.target.zonal_shifts.shifted(now)
        try:
            shifts = await arc.poll(self.arc, self.cluster_arn, now)
        except Exception as err:  # keep the last known shifts; they expire by themselves
            self.log.error("getting zonal shifts failed", error=str(err))
            return zonalshift.POLL_SECONDS
        self.target.zonal_shifts = self.target.zonal_shifts.update(shifts)
        after = self.target.zonal_shifts.shifted(now)
        for zone_id in sorted(after - before):
            self.log.info("ZonalShiftActive", zone_id=zone_id)
        for zone_id in sorted(before - after):
            self.log.info("ZonalShiftCleared", zone_id=zone_id)
        if self.audience is not None and before != after:
            for event in zonalshift.events(before, after, await self.audience.pools()):
                await self.audience.publish(event)
        return zonalshift.POLL_SECONDS
