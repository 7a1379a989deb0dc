"""The AWS runtime's NodeClaim view: what the hash migration reads from the cluster mirror."""

from __future__ import annotations

from typing import Any, cast

import pytest

from karpenter.aws_runtime import ClaimsView
from karpenter.kube.client import KubeClient
from karpenter.state.cluster import ClusterState


def raw_claim(
    name: str, nodeclass: str, annotations: dict[str, str], conditions: list[dict[str, str]]
) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {"karpenter.sh/nodepool": "default"},
            "annotations": annotations,
        },
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": nodeclass,
            },
            "requirements": [],
        },
        "status": {"conditions": conditions},
    }


@pytest.mark.asyncio
async def test_claim_hashes_reads_annotations_and_drifted() -> None:
    """Only the class's claims, sorted, with annotations and whether a Drifted condition is set."""
    state = ClusterState()
    hashed = {"karpenter.k8s.aws/ec2nodeclass-hash-version": "v5"}
    drifted = [{"type": "Drifted", "status": "True", "reason": "NodeClassDrift"}]
    state.nodeclaims.upsert(raw_claim("b", "default", hashed, drifted))
    state.nodeclaims.upsert(raw_claim("a", "default", hashed, []))
    state.nodeclaims.upsert(raw_claim("c", "other", hashed, []))
    view = ClaimsView(cast("KubeClient", None), state)  # reads only; no kube call is made
    got = await view.claim_hashes("default")
    assert [(c.name, dict(c.annotations), c.drifted) for c in got] == [
        ("a", hashed, False),
        ("b", hashed, True),
    ]
    assert await view.names_for_nodeclass("default") == ["a", "b"]
