"""The AWS runtime's cluster reads: the NodeClaim view behind the hash migration, kube-dns."""

from __future__ import annotations

from typing import Any, cast

import pytest

from karpenter.kube import errors
from karpenter.kube.client import KubeClient, Resource
from karpenter.providers.aws.runtime.claims import ClaimsView
from karpenter.providers.aws.runtime.compose import kube_dns_ip
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


class Services:
    """A KubeClient answering ``get`` for Services from a dict (or with an error)."""

    def __init__(
        self, found: dict[tuple[str, str], dict[str, Any]], error: Exception | None = None
    ):
        self.found = found
        self.error = error
        self.asked: list[tuple[str, str, str | None]] = []

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.asked.append((res.plural, name, namespace))
        if self.error is not None:
            raise self.error
        try:
            return self.found[(namespace or "", name)]
        except KeyError:
            raise errors.NotFound(404, "NotFound", name) from None


@pytest.mark.parametrize(
    ("found", "error", "want"),
    [
        pytest.param({"clusterIP": "10.100.0.10"}, None, "10.100.0.10", id="ipv4"),
        pytest.param({"clusterIP": "fd00:10:96::a"}, None, "fd00:10:96::a", id="ipv6"),
        pytest.param({"clusterIP": "None"}, None, "", id="headless"),
        pytest.param(None, None, "", id="absent"),
        pytest.param(None, errors.ApiError(403, "Forbidden", "no"), "", id="forbidden"),
    ],
)
@pytest.mark.asyncio
async def test_kube_dns_ip(
    found: dict[str, str] | None, error: Exception | None, want: str
) -> None:
    """The kube-system/kube-dns ClusterIP, or "" when absent, headless or unreadable."""
    services = {("kube-system", "kube-dns"): {"spec": found}} if found else {}
    kube = Services(services, error)
    assert await kube_dns_ip(cast("KubeClient", kube)) == want
    assert kube.asked == [("services", "kube-dns", "kube-system")]
