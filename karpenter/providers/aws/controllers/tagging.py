"""Tagging controller: once a NodeClaim's Node registers, tag its instance with the names.

Upstream tags ``Name=<node name>``, ``karpenter.sh/nodeclaim=<claim>`` and the EKS cluster
name after registration, then annotates the claim ``karpenter.k8s.aws/tagged=true`` so it is
done once. One claim at a time (upstream runs one worker and pauses between CreateTags calls).
"""

from __future__ import annotations

from typing import Protocol

from karpenter.core.model.node import NodeClaim

TAGGED = "karpenter.k8s.aws/tagged"
CLUSTER_NAME_TAGGED = "compatibility.karpenter.k8s.aws/cluster-name-tagged"


class Tagger(Protocol):
    """The provider's tagging call."""

    async def tag_registered(self, claim: NodeClaim, node_name: str) -> None:
        """Tag the claim's instance."""
        ...


class ClaimAnnotator(Protocol):
    """Writes NodeClaim annotations."""

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        """Merge annotations into the claim."""
        ...


async def reconcile(claim: NodeClaim, tagger: Tagger, claims: ClaimAnnotator) -> bool:
    """Tag one claim's instance if it registered and is not tagged yet; True when it tagged."""
    if not claim.registered or not claim.node_name or claim.deleting:
        return False
    if claim.annotations.get(TAGGED) == "true" or not claim.provider_id:
        return False
    await tagger.tag_registered(claim, claim.node_name)
    await claims.annotate(claim.name, {TAGGED: "true", CLUSTER_NAME_TAGGED: "true"})
    return True
