"""Partition labels for claims whose partition EC2 chose: the stand-in for upstream's hook.

A claim launched into a partition placement group without a pinned partition gets its
``placement-group-partition`` label from a DescribeInstances right after the launch. When EC2
did not show the partition then, this controller reads it again (every 10s, one claim at a
time) and writes the label on the claim and, once registered, its Node. Upstream instead holds
registration until the label is known, so no pod ever sees the Node without it; here pods may
see it unlabelled for one period.
"""

from __future__ import annotations

from typing import Protocol

from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.core import placement

PERIOD_SECONDS = 10.0


class PartitionReader(Protocol):
    """The provider's view of a claim's partition (None: not a partition group, or not yet)."""

    async def assigned_partition(self, claim: NodeClaim) -> int | None:
        """The partition EC2 put the claim's instance in."""
        ...


class ClaimLabeller(Protocol):
    """Writes labels on a NodeClaim and on its Node."""

    async def label(self, name: str, node_name: str, labels: dict[str, str]) -> None:
        """Merge labels into the claim and, when ``node_name`` is set, into that Node."""
        ...


async def reconcile(claim: NodeClaim, reader: PartitionReader, claims: ClaimLabeller) -> bool:
    """Label one claim's partition if it is in a group, unlabelled and EC2 shows it now."""
    if claim.deleting or not claim.provider_id:
        return False
    if placement.LABEL_ID not in claim.labels or placement.LABEL_PARTITION in claim.labels:
        return False
    partition = await reader.assigned_partition(claim)
    if partition is None:
        return False
    await claims.label(claim.name, claim.node_name, {placement.LABEL_PARTITION: str(partition)})
    return True
