"""NodeClass hash migration: what a NodeClaim's hash annotations become after a hash-version bump.

A new ``ec2nodeclass-hash-version`` means the hash function itself changed, so a claim's stored
hash can no longer be compared with its class's: every claim would look drifted. Upstream's
answer (the drift-hash-versioning design) is to re-stamp claims with the current version and,
for claims not already Drifted, the class's current hash. A claim that was already Drifted keeps
its old hash, because with a new hash function there is no way to tell whether it still is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from karpenter.providers.aws.core import labels as awslbl


@dataclass(frozen=True, slots=True)
class ClaimHash:
    """One NodeClaim of the class, as the migration sees it."""

    name: str
    annotations: Mapping[str, str]
    drifted: bool = False


def class_needs_migration(class_annotations: Mapping[str, str]) -> bool:
    """True when the class was hashed by another version (or never): its claims need re-stamping."""
    version = class_annotations.get(awslbl.ANNOTATION_NODECLASS_HASH_VERSION)
    return version != awslbl.NODECLASS_HASH_VERSION


def claim_patch(claim: ClaimHash, class_hash: str) -> dict[str, str]:
    """The annotations to merge into ``claim`` (empty: it already carries the current version)."""
    version = claim.annotations.get(awslbl.ANNOTATION_NODECLASS_HASH_VERSION)
    if version == awslbl.NODECLASS_HASH_VERSION:
        return {}
    patch = {awslbl.ANNOTATION_NODECLASS_HASH_VERSION: awslbl.NODECLASS_HASH_VERSION}
    if not claim.drifted:
        patch[awslbl.ANNOTATION_NODECLASS_HASH] = class_hash
    return patch


def plan(claims: tuple[ClaimHash, ...], class_hash: str) -> tuple[tuple[str, dict[str, str]], ...]:
    """``(claim name, annotation patch)`` for every claim that needs one, sorted by name."""
    out = []
    for claim in sorted(claims, key=lambda c: c.name):
        patch = claim_patch(claim, class_hash)
        if patch:
            out.append((claim.name, patch))
    return tuple(out)
