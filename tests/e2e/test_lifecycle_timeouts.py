"""NodeClaim liveness on a real apiserver: failed launches and missing Nodes time out."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.cloud.provider import CreateError
from karpenter.kube import client as kc
from karpenter.kube import codec
from karpenter.operator import Operator
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


def _disrupted(op: Operator, reason: str, pool: str) -> float:
    """karpenter_nodeclaims_disrupted_total for one reason and pool, over other labels."""
    return sum(
        float(sample.value)
        for family in op.metrics.registry.collect()
        for sample in family.samples
        if sample.name == "karpenter_nodeclaims_disrupted_total"
        and sample.labels.get("reason") == reason
        and sample.labels.get("nodepool") == pool
    )


@pytest.mark.asyncio
async def test_failing_launch_is_unknown_then_deleted_after_launch_timeout(
    control_plane: ControlPlane,
) -> None:
    """A launch error sets Launched=Unknown with the provider's reason; past the launch timeout
    the claim is deleted (reason launch_timeout)."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert isinstance(op.cloud, SimulatedCloud)
        pool = harness.unique("pool")
        op.cloud.inject_create_errors(
            *(CreateError("quota exceeded", "QuotaExceeded"),) * 20, nodepool=pool
        )
        op.lifecycle.launch_timeout_s = 3.0
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("p", pool), ns)

        async def unknown() -> list[dict[str, Any]]:
            return [
                c
                for c in await harness.claims_of(kube, pool)
                if (codec.condition(c, "Launched") or {}).get("reason") == "QuotaExceeded"
            ]

        claim = (await harness.eventually(unknown, "Launched=Unknown/QuotaExceeded"))[0]
        launched = codec.condition(claim, "Launched")
        assert launched is not None and launched["status"] == "Unknown"
        assert launched["message"] == "quota exceeded"

        async def timed_out() -> bool:
            return _disrupted(op, "launch_timeout", pool) >= 1

        await harness.eventually(timed_out, "the launch timeout to delete the claim")
        op.cloud.reset()
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_node_that_never_registers_times_out(control_plane: ControlPlane) -> None:
    """A launched instance whose Node never appears: Registered=Unknown/NodeNotFound, then the
    claim is deleted (reason registration_timeout) and its instance terminated."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert isinstance(op.cloud, SimulatedCloud)
        op.cloud.boot_delay_s = 3600.0
        op.lifecycle.registration_timeout_s = 3.0
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("p", pool), ns)

        async def not_found() -> list[dict[str, Any]]:
            return [
                c
                for c in await harness.claims_of(kube, pool)
                if (codec.condition(c, "Registered") or {}).get("reason") == "NodeNotFound"
            ]

        first = (await harness.eventually(not_found, "Registered=Unknown/NodeNotFound"))[0]

        async def timed_out() -> bool:
            return first["metadata"]["name"] in op.termination.terminated

        await harness.eventually(timed_out, "the registration timeout to delete the claim")
        assert _disrupted(op, "registration_timeout", pool) >= 1
        op.cloud.boot_delay_s = 0.0
        await harness.cleanup(kube, pool, ns)
