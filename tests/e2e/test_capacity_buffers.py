"""CapacityBuffers on a real control plane: headroom launched from a watched buffer, sized from a
workload through scalableRef and percentage, reported by the Provisioning condition, and kept
by disruption (neither emptied nor replaced in a loop)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from karpenter.core.buffers import FAKE_POD_ANNOTATION
from karpenter.kube import client as kc
from karpenter.kube import codec
from karpenter.kube.client import KubeClient
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

GATE = "CapacityBuffer=true"
FAST = (0.5, 1.0)  # disruption poll, validation wait


def _template(pool: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "headroom"}},
        "spec": harness.pod("x", pool, cpu=cpu)["spec"],
    }


def _buffer(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name},
        "spec": spec,
    }


async def _condition(
    kube: KubeClient, ns: str, name: str, kind: str, status: str
) -> dict[str, Any] | None:
    raw = await kube.get(kc.CAPACITYBUFFERS, name, ns)
    cond = codec.condition(raw, kind)
    return raw if cond is not None and cond.get("status") == status else None


async def _live(kube: KubeClient, pool: str) -> list[dict[str, Any]]:
    return [
        c for c in await harness.claims_of(kube, pool) if not codec.meta(c).get("deletionTimestamp")
    ]


@pytest.mark.asyncio
async def test_watched_buffer_launches_headroom_and_reports_it(
    control_plane: ControlPlane,
) -> None:
    """A PodTemplate buffer of two 1-CPU chunks is resolved as soon as it is created (watched,
    not polled), the provisioner launches room for it with no real pod pending, Provisioning
    turns True once that room exists, and an edit of the buffer is seen at once."""
    async with (
        harness.running(control_plane.kubeconfig, FEATURE_GATES=GATE) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert op.capacity_buffers is not None
        op.capacity_buffers.requeue_s = 3600.0  # only watch events can resolve it in time
        pool = harness.unique("buffer")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "chunk"},
            "template": _template(pool),
        }
        await kube.create(kc.PODTEMPLATES, template, ns)
        buffer = _buffer("web", podTemplateRef={"name": "chunk"}, replicas=2)
        await kube.create(kc.CAPACITYBUFFERS, buffer, ns)
        raw = await harness.eventually(
            lambda: _condition(kube, ns, "web", "ReadyForProvisioning", "True"), "Resolved"
        )
        assert raw["status"]["replicas"] == 2
        assert raw["status"]["podTemplateRef"] == {"name": "chunk"}
        assert codec.condition(raw, "ReadyForProvisioning")["reason"] == "Resolved"  # type: ignore[index]

        async def one_claim() -> list[dict[str, Any]]:
            claims = await harness.claims_of(kube, pool)
            return claims if len(claims) == 1 else []

        await harness.eventually(one_claim, "a NodeClaim launched for the buffer")
        raw = await harness.eventually(
            lambda: _condition(kube, ns, "web", "Provisioning", "True"),
            "Provisioning=True once the room exists",
        )
        cond = codec.condition(raw, "Provisioning") or {}
        assert (cond["reason"], cond["message"]) == (
            "FitsExistingCapacity",
            "All 2 virtual pods fit on existing capacity",
        )
        pods, _ = await kube.list(kc.PODS, ns)
        assert not [
            p for p in pods if FAKE_POD_ANNOTATION in (codec.meta(p).get("annotations") or {})
        ]
        await kube.merge_patch(kc.CAPACITYBUFFERS, "web", {"spec": {"replicas": 3}}, ns)

        async def three() -> bool:
            raw = await kube.get(kc.CAPACITYBUFFERS, "web", ns)
            return (raw.get("status") or {}).get("replicas") == 3

        await harness.eventually(three, "the edit resolved", wait_s=15)
        await kube.delete(kc.CAPACITYBUFFERS, "web", ns)
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_scalable_ref_percentage_follows_the_deployment(
    control_plane: ControlPlane,
) -> None:
    """A buffer of 50% of a Deployment takes the Deployment's pod template as its chunk and
    keeps ceil(replicas / 2) chunks as the Deployment scales; a missing workload is reported
    ScalableRefNotFound, an unsupported kind ResolutionFailed naming spec.scalableRef.kind."""
    async with (
        harness.running(control_plane.kubeconfig, FEATURE_GATES=GATE) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert op.capacity_buffers is not None
        op.capacity_buffers.requeue_s = 1.0  # workloads are read, not watched
        pool = harness.unique("scal")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        ref = {"apiGroup": "apps", "kind": "Deployment", "name": "api"}
        await kube.create(kc.CAPACITYBUFFERS, _buffer("api", scalableRef=ref, percentage=50), ns)
        odd = {"apiGroup": "apps", "kind": "DaemonSet", "name": "agents"}
        await kube.create(kc.CAPACITYBUFFERS, _buffer("odd", scalableRef=odd, replicas=1), ns)
        raw = await harness.eventually(
            lambda: _condition(kube, ns, "api", "ReadyForProvisioning", "False"), "not found"
        )
        bad = await harness.eventually(
            lambda: _condition(kube, ns, "odd", "ReadyForProvisioning", "False"), "unsupported"
        )
        cond = codec.condition(bad, "ReadyForProvisioning") or {}
        assert cond["reason"] == "ResolutionFailed"
        assert 'unsupported kind "DaemonSet" in spec.scalableRef.kind' in cond["message"]
        assert not op.state.virtual_pods.of(f"{ns}/odd")
        cond = codec.condition(raw, "ReadyForProvisioning") or {}
        assert (cond["reason"], cond["message"]) == (
            "ScalableRefNotFound",
            'deployments.apps "api" not found',
        )
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "api"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "headroom"}},
                "template": _template(pool, cpu="500m"),
            },
        }
        await kube.create(kc.DEPLOYMENTS, deployment, ns)

        async def replicas(want: int) -> dict[str, Any] | None:
            raw = await _condition(kube, ns, "api", "ReadyForProvisioning", "True")
            return raw if raw is not None and raw["status"].get("replicas") == want else None

        raw = await harness.eventually(lambda: replicas(2), "2 chunks for 3 replicas")
        assert "podTemplateRef" not in raw["status"]
        assert [p.requests["cpu"] for p in op.state.virtual_pods.of(f"{ns}/api")] == [500, 500]
        await kube.merge_patch(kc.DEPLOYMENTS, "api", {"spec": {"replicas": 7}}, ns)
        await harness.eventually(lambda: replicas(4), "4 chunks for 7 replicas")
        await kube.delete(kc.CAPACITYBUFFERS, "api", ns)
        await kube.delete(kc.CAPACITYBUFFERS, "odd", ns)
        await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_headroom_is_neither_emptied_nor_replaced_in_a_loop(
    control_plane: ControlPlane,
) -> None:
    """With consolidation on (WhenEmptyOrUnderutilized, 0s) a node launched for a buffer holds
    no real pod, yet many disruption passes leave it alone and nothing is launched again; once
    the buffer is deleted the same node is emptied."""
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=FAST, FEATURE_GATES=GATE) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("keep")
        ns = await harness.namespace(kube)
        body = harness.nodepool(pool)
        body["spec"]["disruption"] = {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "0s",
        }
        await kube.create(kc.NODEPOOLS, body)
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "chunk"},
            "template": _template(pool),
        }
        await kube.create(kc.PODTEMPLATES, template, ns)
        await kube.create(
            kc.CAPACITYBUFFERS, _buffer("keep", podTemplateRef={"name": "chunk"}, replicas=1), ns
        )

        async def up() -> dict[str, Any] | None:
            claims = await harness.claims_of(kube, pool)
            ok = len(claims) == 1 and codec.condition_true(claims[0], "Initialized")
            return claims[0] if ok else None

        claim = await harness.eventually(up, "the headroom node initialized")
        await harness.eventually(
            lambda: _condition(kube, ns, "keep", "Provisioning", "True"), "headroom reported"
        )
        queue = op.disruption.queue
        # a pass every second even when nothing changes: a dozen decisions over the headroom
        op.disruption.quiet_refresh_s = 1.0
        await anyio.sleep(12)
        claims = await harness.claims_of(kube, pool)
        assert [codec.name(c) for c in claims] == [codec.name(claim)]
        assert not codec.meta(claims[0]).get("deletionTimestamp")
        assert not [c for c in queue.executed + queue.failed if codec.name(claim) in c.candidates]
        assert not [c for c in queue.inflight.values() if codec.name(claim) in c.candidates]
        await kube.delete(kc.CAPACITYBUFFERS, "keep", ns)

        async def emptied() -> bool:
            return not await _live(kube, pool)

        await harness.eventually(emptied, "the node emptied once the buffer is gone", wait_s=60)
        await harness.cleanup(kube, pool, ns)
