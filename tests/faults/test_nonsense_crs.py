"""Bad input the apiserver accepts (matrix item 6): CRs valid one by one that make no sense
together never stop the controller; each gets a logged reason, and sane work still goes on."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def _orphan_claim(pool: str) -> dict[str, Any]:
    """A NodeClaim made by hand for a NodePool that does not exist."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"generateName": "orphan-", "labels": {"karpenter.sh/nodepool": pool}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.test", "kind": "SimNodeClass", "name": "x"},
            "requirements": [{"key": lbl.INSTANCE_TYPE, "operator": "In", "values": ["nope"]}],
        },
    }


@pytest.mark.asyncio
@pytest.mark.timeout(300)
async def test_contradictory_objects_are_refused_and_the_controller_goes_on(
    fault_plane: ControlPlane,
) -> None:
    """A pool no type satisfies, a pool with zero limits, a pod selecting no pool, and a
    hand-made NodeClaim of a missing pool: each pod stays pending with a logged reason, the
    orphan claim gets no instance, and a sane pod still gets a node."""
    with structlog.testing.capture_logs() as logs:
        async with harness.running(fault_plane.kubeconfig) as op:
            async with kc.connect(fault_plane.kubeconfig) as kube:
                ns = await harness.namespace(kube)
                empty, capped, sane = (harness.unique(p) for p in ("empty", "capped", "sane"))
                impossible = [{"key": lbl.INSTANCE_TYPE, "operator": "In", "values": ["nope"]}]
                await kube.create(kc.NODEPOOLS, harness.nodepool(empty, impossible))
                body = harness.nodepool(capped)
                body["spec"]["limits"] = {"cpu": "0"}
                await kube.create(kc.NODEPOOLS, body)
                await kube.create(kc.NODEPOOLS, harness.nodepool(sane))
                await kube.create(kc.PODS, harness.pod("in-empty", empty), ns)
                await kube.create(kc.PODS, harness.pod("in-capped", capped), ns)
                lost = harness.pod("nowhere", sane, selector={"e2e.karpenter.test/zzz": "1"})
                await kube.create(kc.PODS, lost, ns)
                orphan = await kube.create(kc.NODECLAIMS, _orphan_claim(harness.unique("gone")))
                await kube.create(kc.PODS, harness.pod("fine", sane), ns)

                async def fine_bound() -> bool:
                    pod = await kube.get(kc.PODS, "fine", ns)
                    return bool(pod["spec"].get("nodeName"))

                await harness.eventually(fine_bound, "the sane pod bound")
                pods, _ = await kube.list(kc.PODS, ns)
                pending = sorted(
                    p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")
                )
                assert pending == ["in-capped", "in-empty", "nowhere"]
                assert op.leading and all(i.synced.is_set() for i in op.informers)
                # the orphan is removed or left unlaunched, never given an instance
                claims, _ = await kube.list(kc.NODECLAIMS)
                [left] = [
                    c for c in claims if c["metadata"]["name"] == orphan["metadata"]["name"]
                ] or [{}]
                assert not (left.get("status") or {}).get("providerID")
                if left:
                    await kube.delete(kc.NODECLAIMS, left["metadata"]["name"])
                for pool in (empty, capped):
                    await kube.delete(kc.NODEPOOLS, pool)
                await harness.cleanup(kube, sane, ns)
    unschedulable = [e for e in logs if e.get("unschedulable")]
    assert unschedulable, "no provisioning pass reported the unschedulable pods"
