"""Pods arriving over several seconds: later passes use the in-flight claims of earlier ones,
and wait for in-flight launches only when a pending pod's topology needs the launched zone.

Nodes boot slowly here (15 s), so the first wave's claim is still in flight, its pods still
pending, when the second wave arrives and a second pass runs. That pass must put the first
wave back on its claim and must not buy more capacity than one pass over every pod would. The
capacity is counted once every pod has its place and before any node is up: once nodes are
Ready the kube-scheduler binds pods by its own scoring, not by the plan (a second-wave pod may
take the room planned for a first-wave one), which is the kube-scheduler's choice, not a pass's.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from karpenter.cloud.provider import CreateError
from karpenter.controllers.provisioner import PassReport
from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.kube import client as kc
from karpenter.kube import codec
from karpenter.operator import Operator
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.support import builders as b

pytestmark = pytest.mark.e2e

# Linear prices (per CPU), so "capacity bought" and "price paid" agree.
CATALOG = (
    b.instance_type("m-4x", 4, 16, price=0.4, zones=("test-zone-a",)),
    b.instance_type("m-8x", 8, 32, price=0.8, zones=("test-zone-a",)),
)
# The first wave fills one m-4x (3.9 CPU allocatable) exactly; re-packing both waves first-fit
# around that claim would strand pods and open an m-8x beside it (12 CPU bought, not 8).
WAVES = (("1600m", "1200m", "1100m"), ("1500m", "1300m", "1100m"))
CPUS = {"m-4x": 4, "m-8x": 8}


def _one_pass_cpus() -> int:
    """CPUs one provisioning pass over every pod of every wave buys (the same solver)."""
    pods = [b.pod(cpu=cpu, memory="0") for wave in WAVES for cpu in wave]
    results = solve(b.cluster(types=CATALOG), pods, Options())
    return sum(CPUS[c.launch.instance_type] for c in results.new_claims)


@pytest.mark.asyncio
async def test_waves_buy_no_more_than_one_pass(control_plane: ControlPlane) -> None:
    """Pods arriving in two waves seconds apart get no more capacity than one pass would buy."""
    async with (
        harness.running(control_plane.kubeconfig, catalog=CATALOG, boot_delay_s=15.0) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("pool")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        for wave, cpus in enumerate(WAVES):
            for i, cpu in enumerate(cpus):
                await kube.create(kc.PODS, harness.pod(f"w{wave}-{i}", pool, cpu=cpu), ns)
                await anyio.sleep(0.3)
            if wave == 0:

                async def first_claim() -> bool:
                    return len(await harness.claims_of(kube, pool)) == 1

                await harness.eventually(first_claim, "the first wave's NodeClaim")
                await anyio.sleep(1.0)

        async def all_placed() -> list[dict[str, Any]]:
            placed = [k for k in op.state.nominations if k.startswith(f"{ns}/")]
            return await harness.claims_of(kube, pool) if len(placed) == 6 else []

        claims = await harness.eventually(all_placed, "every pod placed by a pass")
        assert not [c for c in claims if codec.condition_true(c, "Registered")], "a node is up"
        bought = sum(
            CPUS[c["metadata"]["labels"]["node.kubernetes.io/instance-type"]] for c in claims
        )
        assert bought <= _one_pass_cpus() == 8

        async def all_running() -> bool:
            pods, _ = await kube.list(kc.PODS, ns)
            return len(pods) == 6 and all(p["status"].get("phase") == "Running" for p in pods)

        await harness.eventually(all_running, "all six pods Running on kwok nodes")
        creating = [p for p in op.provisioner.passes if p.created]
        assert len(creating) >= 2, "each wave must have been its own pass"
        await harness.cleanup(kube, pool, ns)


def _zone_spread(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["labels"] = {"app": "zonal"}
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "zonal"}},
        }
    ]
    return pod


async def _pass_creating(kube: kc.KubeClient, op: Operator, pool: str) -> PassReport:
    """The pass that created ``pool``'s first NodeClaim."""

    async def claims() -> list[dict[str, Any]]:
        return await harness.claims_of(kube, pool)

    name = codec.name((await harness.eventually(claims, f"{pool}'s NodeClaim"))[0])

    async def report() -> PassReport | None:
        # the claim is visible in the apiserver before its pass has finished and reported
        return next((p for p in op.provisioner.passes if name in p.created), None)

    found: PassReport = await harness.eventually(report, f"the pass that created {name}")
    return found


@pytest.mark.asyncio
async def test_a_pass_waits_for_launches_only_when_a_pod_needs_their_zone(
    control_plane: ControlPlane,
) -> None:
    """With a claim stuck unlaunched, a pass for plain pods goes ahead without waiting for it;
    a pass for a zone-spread pod waits (the spread needs the launched zone)."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert isinstance(op.cloud, SimulatedCloud)
        stuck, plain, zonal = (harness.unique(p) for p in ("stuck", "plain", "zonal"))
        op.cloud.inject_create_errors(
            *(CreateError("quota exceeded", "QuotaExceeded"),) * 50, nodepool=stuck
        )
        ns = await harness.namespace(kube)
        for pool in (stuck, plain, zonal):
            await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        await kube.create(kc.PODS, harness.pod("stuck", stuck), ns)

        async def unlaunched() -> list[dict[str, Any]]:
            return [
                c
                for c in await harness.claims_of(kube, stuck)
                if (codec.condition(c, "Launched") or {}).get("status") == "Unknown"
            ]

        await harness.eventually(unlaunched, "the stuck pool's claim unlaunched")
        await kube.create(kc.PODS, harness.pod("plain", plain), ns)
        assert not (await _pass_creating(kube, op, plain)).waited
        await kube.create(kc.PODS, _zone_spread(harness.pod("zonal", zonal)), ns)
        assert (await _pass_creating(kube, op, zonal)).waited
        assert await unlaunched(), "the stuck claim stayed unlaunched throughout"
        op.cloud.reset()
        await harness.cleanup(kube, stuck, ns)
        for pool in (plain, zonal):  # (cleanup deletes a namespace: an empty one each)
            await harness.cleanup(kube, pool, await harness.namespace(kube))
