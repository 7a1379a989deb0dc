"""The controller logs each pod that becomes unschedulable once, with the solver's reason."""

from __future__ import annotations

import itertools
from collections.abc import MutableMapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from karpenter.kube import client as kc
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

EVENT = "pod is unschedulable"


@pytest.mark.asyncio
async def test_each_unschedulable_pod_is_logged_once(control_plane: ControlPlane) -> None:
    """A pod no instance type holds is logged once with its reason, however many passes see
    it; a pod that gets a node is never logged as unschedulable."""
    pool = harness.unique("unsched")
    with capture_logs() as logs:
        async with (
            kc.connect(control_plane.kubeconfig) as kube,
            harness.running(control_plane.kubeconfig) as op,
        ):
            ns = await harness.namespace(kube)
            await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
            await kube.create(kc.PODS, harness.pod("huge", pool, cpu="500"), ns)

            def logged(key: str) -> list[MutableMapping[str, Any]]:
                return [e for e in logs if e.get("event") == EVENT and e.get("pod") == key]

            async def seen() -> bool:
                return bool(logged(f"{ns}/huge"))

            await harness.eventually(seen, "the unschedulable pod's log line")
            await kube.create(kc.PODS, harness.pod("small", pool, cpu="100m"), ns)

            async def placed() -> bool:
                return bool(await harness.claims_of(kube, pool))

            await harness.eventually(placed, "a NodeClaim for the small pod")
            before = len(op.provisioner.passes)
            op.provisioner.trigger_all()

            async def another_pass() -> bool:
                return len(op.provisioner.passes) > before

            await harness.eventually(another_pass, "one more provisioning pass")
            huge = logged(f"{ns}/huge")
            small = logged(f"{ns}/small")
            # deleting the pool changes the reason (logged again): count before cleaning up
            await harness.cleanup(kube, pool, ns)
    # other tests' NodePools in the shared cluster add clauses to the reason (and, coming or
    # going, change it: logged again); what must never happen is the same reason twice
    reasons = [e["reason"] for e in huge]
    assert reasons and all(a != b for a, b in itertools.pairwise(reasons)), reasons
    assert all("no instance type has 500 cpu" in r for r in reasons)
    assert small == []
    passes = [e for e in logs if e.get("event") == "provisioning pass" and e.get("pods")]
    assert len(passes) > len(huge)  # several passes saw the pod; it was logged once per reason
