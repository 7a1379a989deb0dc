"""The conditions users watch, on a real control plane: Consolidatable, concurrent status writers,
NodeRegistrationHealthy (and its reset on NodeClass edits), the node-shape consistency check."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from karpenter.aio.clock import RealClock
from karpenter.controllers import conditions
from karpenter.controllers.registration_health import RegistrationHealth
from karpenter.core.model.node import NodeClaim
from karpenter.kube import client as kc
from karpenter.kube import codec
from karpenter.kube.client import Obj
from karpenter.kube.informers import Informer
from karpenter.providers.aws.runtime.nodeclasses import EC2NODECLASSES, NodeClasses
from karpenter.providers.simulated.cloud import SimulatedCloud
from karpenter.state.cluster import ClusterState
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.support import context, ec2nodeclass_cases

pytestmark = pytest.mark.e2e


async def _one_node(kube: kc.KubeClient, pool: str, ns: str, **spec: Any) -> dict[str, Any]:
    body = harness.nodepool(pool)
    body["spec"]["disruption"].update(spec)
    await kube.create(kc.NODEPOOLS, body)
    await kube.create(kc.PODS, harness.pod("p", pool), ns)

    async def up() -> dict[str, Any] | None:
        claims = await harness.claims_of(kube, pool)
        ok = len(claims) == 1 and codec.condition_true(claims[0], "Initialized")
        return claims[0] if ok else None

    return await harness.eventually(up, "the pool's node initialized")  # type: ignore[no-any-return]


@pytest.mark.asyncio
async def test_consolidatable_after_consolidate_after(control_plane: ControlPlane) -> None:
    """A claim becomes Consolidatable once consolidateAfter has passed since its last pod event,
    and the status-condition metric counts it."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("cons")
        ns = await harness.namespace(kube)
        # WhenEmpty: the node (holding a pod) stays, so only the condition is at stake
        claim = await _one_node(
            kube, pool, ns, consolidateAfter="3s", consolidationPolicy="WhenEmpty"
        )
        name = codec.name(claim)

        async def marked() -> bool:
            raw = await kube.get(kc.NODECLAIMS, name)
            return codec.condition_true(raw, "Consolidatable")

        await harness.eventually(marked, "Consolidatable=True", wait_s=30)
        raw = await kube.get(kc.NODECLAIMS, name)
        event = codec.parse_time(raw["status"]["lastPodEventTime"]) or 0.0
        cond = codec.condition(raw, "Consolidatable") or {}
        assert (codec.parse_time(cond.get("lastTransitionTime")) or 0.0) >= event + 3.0 - 1.0
        assert op.condition_metrics is not None
        op.condition_metrics.refresh()
        text = op.metrics.render().decode()
        assert (
            f'operator_nodeclaim_status_condition_count{{nodepool="{pool}",'
            'reason="Consolidatable",status="True",type="Consolidatable"} 1.0'
        ) in text
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_stale_status_write_keeps_a_concurrent_drifted(control_plane: ControlPlane) -> None:
    """A status write computed from an old copy of the claim meets a Conflict, re-reads, and
    applies only its own change: the Drifted condition written in between survives."""
    async with (
        harness.running(control_plane.kubeconfig),
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("race")
        ns = await harness.namespace(kube)
        claim = await _one_node(kube, pool, ns)
        name = codec.name(claim)
        stale = await kube.get(kc.NODECLAIMS, name)

        def drifted(conds: list[Obj]) -> bool:
            return codec.set_condition(conds, "Drifted", "True", "AMIDrift", "", RealClock().now())

        await conditions.update(kube, kc.NODECLAIMS, name, drifted)
        before = codec.conditions(stale)
        after = codec.conditions(stale)
        codec.set_condition(after, "Example", "True", "Example", "", RealClock().now())
        written = await conditions.update(
            kube, kc.NODECLAIMS, name, conditions.replaying(before, after), raw=stale
        )
        assert written is not None
        kinds = {c["type"]: c["status"] for c in codec.conditions(written)}
        assert kinds["Drifted"] == "True" and kinds["Example"] == "True"
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_node_registration_healthy(control_plane: ControlPlane) -> None:
    """A registered launch sets NodeRegistrationHealthy=True; two registration timeouts in the
    window set it False (RegistrationFailed); editing the NodePool resets it to Unknown."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("health")
        ns = await harness.namespace(kube)
        await _one_node(kube, pool, ns)

        async def status(want: str) -> dict[str, Any] | None:
            raw = await kube.get(kc.NODEPOOLS, pool)
            cond = codec.condition(raw, "NodeRegistrationHealthy")
            return cond if cond is not None and cond.get("status") == want else None

        await harness.eventually(lambda: status("True"), "NodeRegistrationHealthy=True")
        op.lifecycle.registration_timeout_s = 2.0
        op_cloud = op.cloud
        assert isinstance(op_cloud, SimulatedCloud)
        op_cloud.boot_delay_s = 3600.0  # instances launch, their Nodes never appear
        for i in range(2):
            await kube.create(kc.PODS, harness.pod(f"stuck-{i}", pool, cpu="3"), ns)
        cond = await harness.eventually(
            lambda: status("False"), "NodeRegistrationHealthy=False", wait_s=60
        )
        assert (cond["reason"], cond["message"]) == (
            "RegistrationFailed",
            "Failed to register node",
        )
        # Nothing may register or time out around the edit, or the reset is overwritten before
        # it is seen: the stuck pods go, and their claims with them, before the pool is edited.
        for i in range(2):
            await kube.delete(kc.PODS, f"stuck-{i}", ns)

        async def only_the_healthy_claim() -> bool:
            return len(await harness.claims_of(kube, pool)) == 1

        await harness.eventually(only_the_healthy_claim, "the stuck launches gone", wait_s=60)
        await kube.merge_patch(kc.NODEPOOLS, pool, {"spec": {"weight": 7}})
        await harness.eventually(lambda: status("Unknown"), "reset to Unknown after an edit")
        op_cloud.boot_delay_s = 0.0
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_node_shape_inconsistency_is_reported(control_plane: ControlPlane) -> None:
    """A Node reporting far less CPU than its NodeClaim expected gets a FailedConsistencyCheck
    Event on the claim and ConsistentStateFound=False."""
    async with (
        harness.running(control_plane.kubeconfig) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("shape")
        ns = await harness.namespace(kube)
        claim = await _one_node(kube, pool, ns)
        name, node = codec.name(claim), claim["status"]["nodeName"]
        await kube.merge_patch(
            kc.NODES, node, {"status": {"capacity": {"cpu": "100m"}}}, subresource="status"
        )

        async def reported() -> list[dict[str, Any]]:
            await op.consistency.reconcile()
            items, _ = await kube.list(
                kc.EVENTS, "default", field_selector=f"involvedObject.name={name}"
            )
            return [e for e in items if e.get("reason") == "FailedConsistencyCheck"]

        op.consistency.scan_period_s = 0.0
        [event] = await harness.eventually(reported, "a FailedConsistencyCheck event")
        assert event["type"] == "Warning" and "of resource cpu, but found 100m" in event["message"]
        raw = await kube.get(kc.NODECLAIMS, name)
        cond = codec.condition(raw, "ConsistentStateFound") or {}
        assert (cond.get("status"), cond.get("reason")) == ("False", "ConsistencyCheckFailed")
        await harness.cleanup(kube, pool, ns)


class _CountingKube(kc.KubeClient):
    """The real client, counting the status writes it sends per resource."""

    status_writes: dict[str, int]

    async def merge_patch(self, res: kc.Resource, name: str, *args: Any, **kw: Any) -> Obj:
        if kw.get("subresource") == "status":
            counts = self.__dict__.setdefault("status_writes", {})
            counts[res.kind] = counts.get(res.kind, 0) + 1
        return await super().merge_patch(res, name, *args, **kw)


@pytest.mark.asyncio
async def test_a_burst_of_registrations_writes_the_flip_once(control_plane: ControlPlane) -> None:
    """Forty registrations observed at once (a burst's lifecycle reconciles) flip
    NodeRegistrationHealthy to True with one NodePool status write, not one per observer
    racing the first write (each a 409 and a re-read on the controller's QPS)."""
    clock = RealClock()
    async with kc.connect(control_plane.kubeconfig) as plain:
        kube = _CountingKube(plain.http, plain.creds, plain.limiter)
        state = ClusterState()
        async with anyio.create_task_group() as tg:
            await tg.start(Informer(kube, kc.NODEPOOLS, state.nodepools, clock).run)
            health = RegistrationHealth(context.controller_context(kube, clock, state=state))
            pool_name = harness.unique("burst")
            raw = await kube.create(kc.NODEPOOLS, harness.nodepool(pool_name))

            async def mirrored() -> bool:
                return state.nodepools.get(pool_name) is not None

            await harness.eventually(mirrored, "the pool mirrored")
            owners = [{"kind": "NodePool", "uid": codec.uid(raw)}]
            async with anyio.create_task_group() as burst:
                for i in range(40):
                    claim = NodeClaim(f"c{i}", pool_name)
                    burst.start_soon(health.observe, claim, owners, True, "", "")
            current = await kube.get(kc.NODEPOOLS, pool_name)
            cond = codec.condition(current, "NodeRegistrationHealthy") or {}
            assert cond.get("status") == "True"
            assert kube.status_writes == {"NodePool": 1}
            await kube.delete(kc.NODEPOOLS, pool_name)
            tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_registration_health_resets_when_the_nodeclass_changes(
    control_plane: ControlPlane,
) -> None:
    """An edit of the NodePool's EC2NodeClass (its generation moves) resets
    NodeRegistrationHealthy to Unknown and empties the window, and the NodePool records the
    NodeClass generation it saw; an unchanged NodeClass leaves the condition alone."""
    clock = RealClock()
    async with kc.connect(control_plane.kubeconfig) as kube:
        state = ClusterState()
        classes = NodeClasses(kube, clock)
        feeds = ((kc.NODEPOOLS, state.nodepools), (EC2NODECLASSES, classes.store))
        async with anyio.create_task_group() as tg:
            for resource, sink in feeds:
                await tg.start(Informer(kube, resource, sink, clock).run)
            base = context.controller_context(kube, clock, state=state)
            ctx = dataclasses.replace(base, node_class_generation=classes.generation)
            health = RegistrationHealth(ctx)
            nodeclass = ec2nodeclass_cases.base()
            await kube.create(EC2NODECLASSES, nodeclass)
            name = nodeclass["metadata"]["name"]
            pool = harness.nodepool(harness.unique("nchealth"))
            pool["spec"]["template"]["spec"]["nodeClassRef"] = {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": name,
            }
            await kube.create(kc.NODEPOOLS, pool)
            pool_name = pool["metadata"]["name"]

            async def seen(generation: int) -> bool:
                raw = classes.store.raw(name)
                return (
                    state.nodepools.get(pool_name) is not None
                    and raw is not None
                    and (codec.meta(raw).get("generation") == generation)
                )

            await harness.eventually(lambda: seen(1), "the mirror holds both objects")
            assert await health.reconcile() == [pool_name]
            raw = await kube.get(kc.NODEPOOLS, pool_name)
            assert raw["status"]["nodeClassObservedGeneration"] == 1
            state.nodepools.upsert(raw)
            # a launch of the pool registers: the window turns healthy
            owners = [{"kind": "NodePool", "uid": codec.uid(raw)}]
            await health.observe(NodeClaim("c", pool_name), owners, True, "", "")

            async def mirrored(status: str) -> bool:
                current = state.nodepools.raw(pool_name) or {}
                cond = codec.condition(current, "NodeRegistrationHealthy") or {}
                return cond.get("status") == status

            await harness.eventually(lambda: mirrored("True"), "True in the mirror")
            assert await health.reconcile() == []
            await kube.merge_patch(EC2NODECLASSES, name, {"spec": {"role": "AnotherRole"}})
            await harness.eventually(lambda: seen(2), "the NodeClass edit in the mirror")
            assert await health.reconcile() == [pool_name]
            raw = await kube.get(kc.NODEPOOLS, pool_name)
            cond = codec.condition(raw, "NodeRegistrationHealthy") or {}
            assert (cond.get("status"), cond.get("reason")) == ("Unknown", "AwaitingReconciliation")
            assert raw["status"]["nodeClassObservedGeneration"] == 2
            assert codec.uid(raw) not in health.windows
            await harness.eventually(lambda: mirrored("Unknown"), "Unknown in the mirror")
            assert await health.reconcile() == []
            await kube.delete(kc.NODEPOOLS, pool_name)
            await kube.delete(EC2NODECLASSES, name)
            tg.cancel_scope.cancel()
