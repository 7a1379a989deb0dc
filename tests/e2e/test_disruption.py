"""The disruption controller on a real control plane: empty nodes go, underused ones shrink."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import pytest

from karpenter.aio.clock import RealClock
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

FAST = (0.5, 1.0)  # poll, validation wait


def _deployment(name: str, pool: str, replicas: int, cpu: str) -> dict[str, Any]:
    template = harness.pod("x", pool, cpu=cpu)
    template["metadata"] = {"labels": {"app": name}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template,
        },
    }


def _pool(name: str, policy: str, requirements: list[dict[str, Any]] | None = None) -> Any:
    body = harness.nodepool(name, requirements)
    body["spec"]["disruption"] = {"consolidationPolicy": policy, "consolidateAfter": "0s"}
    return body


async def _scale(kube: kc.KubeClient, name: str, ns: str, replicas: int) -> None:
    await kube.merge_patch(kc.DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, ns)


async def _live_claims(kube: kc.KubeClient, pool: str) -> list[dict[str, Any]]:
    return [
        c for c in await harness.claims_of(kube, pool) if not codec.meta(c).get("deletionTimestamp")
    ]


async def _gone(kube: kc.KubeClient, claim: str) -> bool:
    try:
        await kube.get(kc.NODECLAIMS, claim)
    except errors.NotFound:
        return True
    return False


async def _bound(kube: kc.KubeClient, ns: str, count: int) -> list[dict[str, Any]]:
    pods, _ = await kube.list(kc.PODS, ns)
    live = [p for p in pods if not codec.meta(p).get("deletionTimestamp")]
    if len(live) == count and all(p["spec"].get("nodeName") for p in live):
        return live
    return []


@pytest.mark.asyncio
async def test_empty_node_is_removed(control_plane: ControlPlane) -> None:
    """Scaling a Deployment to zero empties its node; WhenEmpty removes the NodeClaim."""
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=FAST) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("empty")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, _pool(pool, "WhenEmpty"))
        await kube.create(kc.DEPLOYMENTS, _deployment("web", pool, 2, "500m"), ns)
        await harness.eventually(lambda: _bound(kube, ns, 2), "two replicas bound")
        [claim] = await _live_claims(kube, pool)
        name = claim["metadata"]["name"]
        await _scale(kube, "web", ns, 0)

        await harness.eventually(
            partial(_gone, kube, name), "the empty NodeClaim removed", wait_s=60
        )
        [command] = [
            c
            for c in op.disruption.executed
            if name in {x.state.claim.name for x in c.candidates if x.state.claim}
        ]
        assert (command.reason, command.decision) == ("Empty", "delete")
        text = op.metrics.render().decode()
        assert (
            'karpenter_voluntary_disruption_decisions_total{consolidation_type="empty",'
            'decision="delete",reason="empty"} 1.0'
        ) in text
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_emptiness_waits_while_pods_are_on_the_move(control_plane: ControlPlane) -> None:
    """A pod still bound to a Node being deleted is on its way to another node: the empty
    node waits (the controller reports settling) for at most ``settle_max_s``, then goes."""
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=FAST) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        op.disruption.settle_max_s = 10.0
        pool, draining = harness.unique("settle"), harness.unique("draining")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, _pool(pool, "WhenEmpty"))
        await kube.create(kc.DEPLOYMENTS, _deployment("web", pool, 1, "500m"), ns)
        await harness.eventually(lambda: _bound(kube, ns, 1), "the replica bound")
        [claim] = await _live_claims(kube, pool)
        # not kwok's (no annotation): a Node held in deletion by a finalizer, a pod bound to it
        hold = "e2e.karpenter.test/hold"
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": draining, "finalizers": [hold]},
        }
        await kube.create(kc.NODES, node)
        stranded = harness.pod("stranded", pool, cpu="100m")
        stranded["spec"]["nodeName"] = draining
        await kube.create(kc.PODS, stranded, ns)
        await kube.delete(kc.NODES, draining)
        deleted_at = anyio.current_time()

        async def moving() -> bool:
            return op.state.pods_in_motion(RealClock().now(), 10.0) > 0

        await harness.eventually(moving, "the stranded pod seen on the move")
        await _scale(kube, "web", ns, 0)
        name = claim["metadata"]["name"]

        async def held_back() -> bool:
            return op.disruption.settling and bool(await _live_claims(kube, pool))

        await harness.eventually(held_back, "the empty node held back while settling")

        await harness.eventually(
            partial(_gone, kube, name), "the empty NodeClaim removed after the hold", wait_s=60
        )
        assert anyio.current_time() - deleted_at >= 10.0
        await kube.delete(kc.PODS, "stranded", ns, grace_period_s=0)
        await kube.json_patch(
            kc.NODES, draining, [{"op": "remove", "path": "/metadata/finalizers"}]
        )
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_underused_node_is_replaced_by_a_cheaper_one(control_plane: ControlPlane) -> None:
    """Two 1-CPU replicas share a 3-CPU node; at one replica a 2-CPU node replaces it and the
    replica lands there."""
    on_demand = [{"key": lbl.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=FAST) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("shrink")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, _pool(pool, "WhenEmptyOrUnderutilized", on_demand))
        await kube.create(kc.DEPLOYMENTS, _deployment("api", pool, 2, "1"), ns)
        await harness.eventually(lambda: _bound(kube, ns, 2), "two replicas bound")
        [first] = await _live_claims(kube, pool)
        first_type = first["metadata"]["labels"][lbl.INSTANCE_TYPE]
        assert first_type == "fake-it-2"
        await _scale(kube, "api", ns, 1)

        async def replaced() -> str:
            claims = await _live_claims(kube, pool)
            names = {c["metadata"]["name"] for c in claims}
            if first["metadata"]["name"] in names or len(claims) != 1:
                return ""
            if not await _bound(kube, ns, 1):
                return ""
            return str(claims[0]["metadata"]["labels"].get(lbl.INSTANCE_TYPE, ""))

        got = await harness.eventually(replaced, "the node replaced by a cheaper one", wait_s=90)
        assert got == "fake-it-1"
        [command] = op.disruption.executed
        assert (command.reason, command.decision, command.method) == (
            "Underutilized",
            "replace",
            "single",
        )
        assert command.savings > 0
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_provider_drift_replaces_the_node(control_plane: ControlPlane) -> None:
    """The provider reports drift → Drifted condition → the node is replaced, pods moved."""
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=FAST) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("drift")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))  # consolidation off
        await kube.create(kc.DEPLOYMENTS, _deployment("app", pool, 1, "500m"), ns)
        await harness.eventually(lambda: _bound(kube, ns, 1), "the replica bound")
        [old] = await _live_claims(kube, pool)
        name = old["metadata"]["name"]

        async def initialized() -> bool:
            claim = op.state.nodeclaims.get(name)
            return claim is not None and claim.initialized

        await harness.eventually(initialized, "the claim initialized in the mirror")
        assert isinstance(op.cloud, SimulatedCloud)
        op.cloud.drifted[name] = "AMIDrift"

        async def recorded() -> bool:
            # a concurrent status write (lastPodEventTime) makes a round skip the claim
            await op.drift.reconcile()
            claim = op.state.nodeclaims.get(name)
            return claim is not None and claim.drifted == "AMIDrift"

        await harness.eventually(recorded, "the Drifted condition written")
        cond = codec.condition(await kube.get(kc.NODECLAIMS, name), "Drifted")
        assert cond is not None and (cond["status"], cond["reason"]) == ("True", "AMIDrift")

        async def replaced() -> bool:
            claims = await _live_claims(kube, pool)
            return (
                len(claims) == 1
                and claims[0]["metadata"]["name"] != name
                and bool(await _bound(kube, ns, 1))
            )

        await harness.eventually(replaced, "the drifted node replaced", wait_s=60)
        [command] = op.disruption.executed
        assert (command.reason, command.method, command.decision) == ("Drifted", "drift", "replace")
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_drift_starts_the_next_command_without_waiting_a_poll(
    control_plane: ControlPlane,
) -> None:
    """Three drifted nodes under a 100% budget are all being replaced within a few seconds of
    the first command, though the poll is 30 s: a pass that started a command is followed at
    once by the next (upstream requeues immediately), so drift does not take a poll per node."""
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=(30.0, 1.0)) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("drift3")
        ns = await harness.namespace(kube)
        body = harness.nodepool(pool)  # consolidation off
        body["spec"].setdefault("disruption", {})["budgets"] = [{"nodes": "100%"}]
        await kube.create(kc.NODEPOOLS, body)
        spread = _deployment("app", pool, 3, "500m")
        spread["spec"]["template"]["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "app"}}, "topologyKey": lbl.HOSTNAME}
                ]
            }
        }
        await kube.create(kc.DEPLOYMENTS, spread, ns)
        await harness.eventually(lambda: _bound(kube, ns, 3), "three replicas bound")
        names = [c["metadata"]["name"] for c in await _live_claims(kube, pool)]
        assert len(names) == 3

        async def initialized() -> bool:
            return all((c := op.state.nodeclaims.get(n)) and c.initialized for n in names)

        await harness.eventually(initialized, "the claims initialized in the mirror")
        assert isinstance(op.cloud, SimulatedCloud)
        for name in names:
            op.cloud.drifted[name] = "AMIDrift"

        async def recorded() -> bool:
            await op.drift.reconcile()
            return all((c := op.state.nodeclaims.get(n)) and c.drifted for n in names)

        await harness.eventually(recorded, "the Drifted conditions written")
        seen: dict[str, float] = {}

        async def all_started() -> bool:
            queue = op.disruption.queue
            for cmd in [*queue.inflight.values(), *queue.executed]:
                if cmd.reason == "Drifted":
                    for claim in cmd.candidates:
                        seen.setdefault(claim, anyio.current_time())
            return set(names) <= set(seen)

        await harness.eventually(all_started, "three drift commands started", wait_s=60)
        started = sorted(seen[n] for n in names)
        assert started[-1] - started[0] < 15.0, started
        await harness.cleanup(kube, pool, ns)
