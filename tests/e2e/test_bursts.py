"""The burst hold's ReplicaSet lookup on a real apiserver: spec.replicas, or None."""

from __future__ import annotations

import pytest

from karpenter.controllers.bursts import kube_lookup
from karpenter.kube import client as kc
from tests.e2e import harness

pytestmark = pytest.mark.e2e


@pytest.mark.asyncio
async def test_lookup_reads_replicas_and_tolerates_a_missing_replicaset(
    kube: kc.KubeClient,
) -> None:
    """A ReplicaSet's spec.replicas as the apiserver has it; None for one it does not have."""
    template = harness.pod("x", "nowhere")  # selects no node: its pods stay pending
    template["metadata"] = {"labels": {"app": "burst-lookup"}}
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "burst-lookup"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "burst-lookup"}},
            "template": template,
        },
    }
    lookup = kube_lookup(kube)
    await kube.create(kc.REPLICASETS, body, namespace="default")
    try:
        assert await lookup("default", "burst-lookup") == 0
        await kube.merge_patch(
            kc.REPLICASETS, "burst-lookup", {"spec": {"replicas": 7}}, namespace="default"
        )
        assert await lookup("default", "burst-lookup") == 7
        assert await lookup("default", "no-such-replicaset") is None
    finally:
        await kube.delete(kc.REPLICASETS, "burst-lookup", namespace="default")
