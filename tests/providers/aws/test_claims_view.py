"""The AWS controllers' view of NodeClaims: relabelling a claim and its Node in one call."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from karpenter.kube.client import NODECLAIMS, NODES, KubeClient, Resource
from karpenter.providers.aws.controllers.capacity_type import DEMOTED
from karpenter.providers.aws.runtime.claims import ClaimsView
from karpenter.state.cluster import ClusterState

PROVIDER_ID = "aws:///us-east-1a/i-0123456789abcdef0"
RESERVED = {
    "karpenter.sh/capacity-type": "reserved",
    "karpenter.k8s.aws/capacity-reservation-id": "cr-1",
    "karpenter.k8s.aws/capacity-reservation-type": "default",
    "team": "ml",
}


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    # RFC 7386, as the apiserver applies a merge patch
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


class Kube:
    """Just enough apiserver for ``merge_patch``: objects by (plural, name)."""

    def __init__(self, *objs: tuple[Resource, dict[str, Any]]) -> None:
        self.objs = {(res.plural, o["metadata"]["name"]): o for res, o in objs}
        self.patches: list[tuple[str, str]] = []

    async def merge_patch(self, res: Resource, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((res.plural, name))
        obj = _merge(self.objs[(res.plural, name)], patch)
        meta = obj["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)  # as the apiserver does
        return copy.deepcopy(obj)


def _claim() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "r-1", "labels": dict(RESERVED), "resourceVersion": "1"},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}
        },
        "status": {"providerID": PROVIDER_ID, "nodeName": "node-1"},
    }


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "labels": dict(RESERVED), "resourceVersion": "1"},
        "spec": {"providerID": PROVIDER_ID},
    }


@pytest.mark.asyncio
async def test_relabel_patches_claim_and_node() -> None:
    """Demotion sets on-demand and removes the reservation labels on the claim and its Node."""
    claim, node = _claim(), _node()
    state = ClusterState()
    state.nodeclaims.upsert(copy.deepcopy(claim))
    state.nodes.upsert(copy.deepcopy(node))
    kube = Kube((NODECLAIMS, claim), (NODES, node))
    view = ClaimsView(cast("KubeClient", kube), state)
    [current] = view.all()
    await view.relabel(current, dict(DEMOTED))
    assert kube.patches == [(NODECLAIMS.plural, "r-1"), (NODES.plural, "node-1")]
    expected = {"karpenter.sh/capacity-type": "on-demand", "team": "ml"}
    assert claim["metadata"]["labels"] == expected
    assert node["metadata"]["labels"] == expected
    [after] = view.all()
    assert after.labels["karpenter.sh/capacity-type"] == "on-demand"
