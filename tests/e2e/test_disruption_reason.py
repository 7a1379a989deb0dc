"""While a disruption command runs, its NodeClaims carry the reason (the viewer shows it)."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.e2e.test_disruption import FAST, _bound, _deployment, _live_claims, _pool, _scale

pytestmark = pytest.mark.e2e


@pytest.mark.asyncio
async def test_a_replaced_claim_carries_the_disruption_reason(
    control_plane: ControlPlane,
) -> None:
    """An underused node being replaced has the disrupted taint and its NodeClaim the
    DisruptionReason condition (True, Underutilized) until it is gone."""
    on_demand = [{"key": lbl.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=FAST),
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("reason")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, _pool(pool, "WhenEmptyOrUnderutilized", on_demand))
        await kube.create(kc.DEPLOYMENTS, _deployment("api", pool, 2, "1"), ns)
        await harness.eventually(lambda: _bound(kube, ns, 2), "two replicas bound")
        [first] = await _live_claims(kube, pool)
        name = first["metadata"]["name"]
        await _scale(kube, "api", ns, 1)

        async def marked() -> tuple[dict[str, Any], dict[str, Any]] | None:
            try:
                claim = await kube.get(kc.NODECLAIMS, name)
            except errors.NotFound:
                raise AssertionError("the claim went away unmarked") from None
            if not codec.condition(claim, "DisruptionReason"):
                return None
            # the queue records the condition first (a restart finds the command by it), then
            # taints the Node: both are in place before the claim is deleted, not at one instant
            node = await kube.get(kc.NODES, claim["status"]["nodeName"])
            taints = {t["key"] for t in node["spec"].get("taints", [])}
            return (claim, node) if lbl.TAINT_DISRUPTED in taints else None

        # the claim as marked: bound pods do not prove its status named the Node yet
        claim, node = await harness.eventually(
            marked, "the DisruptionReason condition and the disrupted taint", wait_s=90
        )
        cond = codec.condition(claim, "DisruptionReason") or {}
        assert (cond["status"], cond["reason"]) == ("True", "Underutilized")
        assert node["metadata"]["name"] == claim["status"]["nodeName"]
        await harness.cleanup(kube, pool, ns)
