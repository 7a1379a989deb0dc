"""Instance-health controller: failed status checks and scheduled events → NodeClaim replaced.

Every minute it polls DescribeInstanceStatus (``aws/cloud/health.py``) and applies
``aws/core/health.py``: broken instances get ``karpenter.sh/nodeclaim-termination-timestamp``
set to now (terminate without waiting for a drain) and their claim deleted; instances with a
scheduled event have their claim deleted (cordon and drain).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud import health as aws_health
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import health

PERIOD_SECONDS = 60.0


class NodeClaimStore(Protocol):
    """The NodeClaims the controller acts on."""

    async def find_by_instance_id(self, instance_id: str) -> NodeClaim | None:
        """The claim of an instance."""
        ...

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        """Merge annotations into the claim."""
        ...

    async def delete(self, name: str) -> None:
        """Delete the claim."""
        ...


class HealthController:
    """Replaces NodeClaims whose instances are broken or scheduled for an event."""

    def __init__(
        self, ec2: Client, claims: NodeClaimStore, now: Callable[[], float], log: Any = None
    ) -> None:
        self.ec2 = ec2
        self.claims = claims
        self.now = now
        self.log = log or structlog.get_logger().bind(controller="interruption.instancestatus")

    async def reconcile(self) -> tuple[list[health.Unhealthy], float]:
        """One poll; returns what it acted on and when to run again."""
        try:
            statuses = await aws_health.describe(self.ec2)
        except Exception as err:
            if errors.code(err) != "UnauthorizedOperation":
                raise
            self.log.error("not authorized to describe instance status", error=str(err))
            return [], PERIOD_SECONDS
        now = self.now()
        acted = []
        for bad in health.classify(statuses, now):
            claim = await self.claims.find_by_instance_id(bad.instance_id)
            if claim is None or claim.deleting:
                continue
            if bad.forceful:
                stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                await self.claims.annotate(claim.name, {lbl.TERMINATION_TIMESTAMP: stamp})
            await self.claims.delete(claim.name)
            acted.append(bad)
            self.log.info("replacing unhealthy instance", nodeclaim=claim.name, kind=bad.kind)
        return acted, PERIOD_SECONDS
