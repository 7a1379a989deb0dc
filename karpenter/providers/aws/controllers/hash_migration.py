"""Applying the NodeClass hash migration to a class's NodeClaims.

The NodeClass controller calls ``migrate`` before it stamps a class with the current hash
version: ``providers.aws.core.hashmigration`` decides each claim's patch, this writes them. Ordering
matters: the claims are rewritten first, so a failure leaves the class on its old version and
the next reconcile retries the whole migration instead of forgetting the claims it missed.
"""

from __future__ import annotations

from typing import Protocol

from karpenter.providers.aws.core import hashmigration


class ClaimHashes(Protocol):
    """The NodeClaims of a class with their hash annotations, and a way to rewrite them."""

    async def claim_hashes(self, nodeclass: str) -> list[hashmigration.ClaimHash]:
        """Every NodeClaim referencing the EC2NodeClass ``nodeclass``."""
        ...

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        """Merge annotations into a NodeClaim (a claim that is gone is ignored)."""
        ...


async def migrate(claims: ClaimHashes, nodeclass: str, class_hash: str) -> tuple[str, ...]:
    """Re-stamp the class's claims with the current hash version; returns the claims patched."""
    found = tuple(await claims.claim_hashes(nodeclass))
    patched = []
    for name, patch in hashmigration.plan(found, class_hash):
        await claims.annotate(name, patch)
        patched.append(name)
    return tuple(patched)
