"""ARC zonal shift against the proxy (moto has no ARC): polling, launches, terminations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

from karpenter.aio.clock import FakeClock
from karpenter.aio.ratelimit import TokenBucket
from karpenter.cloud.provider import CloudProviderError
from karpenter.core.scheduling.requirements import Requirements
from karpenter.kube.client import KubeClient
from karpenter.kube.events import EventRecorder
from karpenter.providers.aws.cloud import zonalshift as arc
from karpenter.providers.aws.controllers.gc import GarbageCollector
from karpenter.providers.aws.controllers.zonalshift import ZonalShiftPoller
from karpenter.providers.aws.core import zonalshift
from karpenter.providers.aws.runtime import nodeclasses
from karpenter.state.cluster import ClusterState
from tests.providers.aws.cloud.arc_proxy import Shift
from tests.providers.aws.cloud.builders import Claims
from tests.providers.aws.cloud.conftest import Moto
from tests.providers.aws.cloud.fixtures import Env, claim, env, prices

__all__ = ("env", "prices")

ARN = "arn:aws:eks:us-east-1:123456789012:cluster/demo"
TYPES = ("m5.large", "c5.large")


def _poller(e: Env) -> ZonalShiftPoller:
    e.provider.cluster_arn = ARN
    return ZonalShiftPoller(e.provider, e.clients.arc, ARN, e.clock)


def _zone_id(e: Env, zone: str) -> str:
    return e.provider.region.zone_ids[zone]


@pytest.mark.asyncio
async def test_registered_only_when_arc_manages_the_cluster(env: Env, moto: Moto) -> None:
    """GetManagedResource answering means registered; ResourceNotFound means not."""
    assert not await arc.registered(env.clients.arc, ARN)
    moto.capacity.arc.managed[ARN] = []
    assert await arc.registered(env.clients.arc, ARN)


@pytest.mark.asyncio
async def test_shifted_zone_gets_no_launches(env: Env, moto: Moto) -> None:
    """After a poll sees an applied shift away from us-east-1a, launches avoid that zone."""
    shifted = _zone_id(env, "us-east-1a")
    moto.capacity.arc.managed[ARN] = [Shift(shifted, env.clock() + 3600)]
    with capture_logs() as logs:
        assert await _poller(env).reconcile() == 30.0
    assert env.provider.zonal_shifts.shifted(env.clock()) == {shifted}
    assert [(e["event"], e["zone_id"]) for e in logs] == [("ZonalShiftActive", shifted)]
    for n in range(2):
        got = await env.provider.create(claim(f"default-{n}", *TYPES))
        assert got.labels["topology.kubernetes.io/zone"] == "us-east-1b"
        assert {z for _, z in moto.capacity.last_pools} == {"us-east-1b"}


@pytest.mark.asyncio
async def test_not_applied_or_expired_shifts_change_nothing(env: Env, moto: Moto) -> None:
    """Shifts ARC has not applied, and expired ones, leave the zone in use."""
    moto.capacity.arc.managed[ARN] = [
        Shift(_zone_id(env, "us-east-1a"), env.clock() + 3600, applied=False),
        Shift(_zone_id(env, "us-east-1b"), env.clock() - 1),
    ]
    await _poller(env).reconcile()
    assert env.provider.zonal_shifts.shifted(env.clock()) == frozenset()
    await env.provider.create(claim("default-1", *TYPES))
    assert {z for _, z in moto.capacity.last_pools} == {"us-east-1a", "us-east-1b"}


@pytest.mark.asyncio
async def test_autoshift_counts_as_shifted(env: Env, moto: Moto) -> None:
    """An applied autoshift (no expiry) shifts the zone too."""
    zone_id = _zone_id(env, "us-east-1b")
    moto.capacity.arc.managed[ARN] = [Shift(zone_id, autoshift=True)]
    await _poller(env).reconcile()
    assert env.provider.zonal_shifts.shifted(env.clock()) == {zone_id}


@pytest.mark.asyncio
async def test_no_termination_in_a_shifted_zone(env: Env, moto: Moto) -> None:
    """Deleting an instance in a shifted zone is refused until the shift is cleared."""
    got = await env.provider.create(claim("default-1", "c5.large"))
    zone = got.labels["topology.kubernetes.io/zone"]
    moto.capacity.arc.managed[ARN] = [Shift(_zone_id(env, zone), env.clock() + 3600)]
    poller = _poller(env)
    await poller.reconcile()
    with pytest.raises(CloudProviderError, match="zonal-shifted"):
        await env.provider.delete(got)
    assert moto.capacity.calls["TerminateInstances"] == 0
    moto.capacity.arc.managed[ARN] = []
    with capture_logs() as logs:
        await poller.reconcile()
    assert any(e["event"] == "ZonalShiftCleared" for e in logs)
    await env.provider.delete(got)
    assert moto.capacity.calls["TerminateInstances"] == 1


@pytest.mark.asyncio
async def test_failed_poll_keeps_the_last_shifts(env: Env, moto: Moto) -> None:
    """When ARC cannot be read, the shifts already known stay (they expire on their own)."""
    zone_id = _zone_id(env, "us-east-1a")
    moto.capacity.arc.managed[ARN] = [Shift(zone_id, env.clock() + 60)]
    poller = _poller(env)
    await poller.reconcile()
    del moto.capacity.arc.managed[ARN]
    with capture_logs() as logs:
        assert await poller.reconcile() == 30.0
    assert any(e["event"] == "getting zonal shifts failed" for e in logs)
    assert env.provider.zonal_shifts.shifted(env.clock()) == {zone_id}
    env.clock.t += 61
    assert env.provider.zonal_shifts.shifted(env.clock()) == frozenset()


@pytest.mark.asyncio
async def test_garbage_collection_skips_shifted_zones(env: Env, moto: Moto) -> None:
    """A leaked instance in a shifted zone is left (with its Node); others are collected."""
    first = await env.provider.create(claim("default-1", "c5.large"))
    zone = first.labels["topology.kubernetes.io/zone"]
    other = "us-east-1b" if zone == "us-east-1a" else "us-east-1a"
    pinned = ("topology.kubernetes.io/zone", "In", (other,), None)
    second = await env.provider.create(
        replace(claim("default-2", "c5.large"), requirements=(*claim().requirements, pinned))
    )
    assert second.labels["topology.kubernetes.io/zone"] == other
    # past the GC's grace for both instances (launched at moto's wall-clock time)
    env.clock.t = max(c.creation for c in await env.provider.list()) + 31
    moto.capacity.arc.managed[ARN] = [Shift(_zone_id(env, zone), env.clock() + 3600)]
    await _poller(env).reconcile()
    claims = Claims()
    gc = GarbageCollector(env.provider, claims, env.clock)
    collected, _ = await gc.reconcile()
    assert collected == [second.provider_id]
    assert claims.nodes_deleted == [second.provider_id]


class _Audience:
    """One unrestricted NodePool over the default NodeClass's zones; Events recorded."""

    def __init__(self, e: Env) -> None:
        self.env = e
        self.posted: list[zonalshift.Event] = []

    async def pools(self) -> list[zonalshift.PoolView]:
        subnets = self.env.classes.items["default"].status.subnets
        zones = {s.zone_id: s.zone for s in subnets}
        return [zonalshift.PoolView("default", Requirements(), zones)]

    async def publish(self, event: zonalshift.Event) -> None:
        self.posted.append(event)


@pytest.mark.asyncio
async def test_nodepools_hear_of_shifts_once(env: Env, moto: Moto) -> None:
    """A shift is announced on the NodePool once, its clearing once, repeats say nothing."""
    env.provider.cluster_arn = ARN
    audience = _Audience(env)
    poller = ZonalShiftPoller(env.provider, env.clients.arc, ARN, env.clock, audience)
    zone_id = _zone_id(env, "us-east-1a")
    moto.capacity.arc.managed[ARN] = [Shift(zone_id, env.clock() + 3600)]
    await poller.reconcile()
    await poller.reconcile()
    moto.capacity.arc.managed[ARN] = []
    await poller.reconcile()
    assert [(e.nodepool, e.type, e.reason) for e in audience.posted] == [
        ("default", "Warning", "ZonalShiftActive"),
        ("default", "Normal", "ZonalShiftCleared"),
    ]
    assert f"us-east-1a ({zone_id})" in audience.posted[0].message


class _Recorder(EventRecorder):
    """Records what would be posted (no apiserver)."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str, str]] = []

    async def publish(
        self,
        involved: Mapping[str, Any],
        event_type: str,
        reason: str,
        message: str,
        *,
        dedupe_s: float = 0.0,
        background: bool = False,
        sample: TokenBucket | None = None,
    ) -> bool:
        self.posted.append((str(involved["kind"]), str(involved["name"]), event_type, reason))
        return True


def _nodepool(name: str, *zones: str) -> dict[str, Any]:
    reqs = [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(zones)}]
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    }
    if zones:
        spec["requirements"] = reqs
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"template": {"spec": spec}},
    }


_NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default", "resourceVersion": "1"},
    "spec": {
        "role": "r",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"k": "v"}}],
        "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
    },
    "status": {
        "subnets": [
            {"id": "subnet-a", "zone": "us-east-1a", "zoneID": "use1-az1"},
            {"id": "subnet-b", "zone": "us-east-1b", "zoneID": "use1-az2"},
        ]
    },
}


@pytest.mark.asyncio
async def test_runtime_audience_reads_the_mirror_and_posts_on_nodepools() -> None:
    """The runtime's audience: NodePools from the mirror with their NodeClass's zones; Events
    go to the NodePool object."""
    state = ClusterState()
    state.nodepools.upsert(_nodepool("any"))
    state.nodepools.upsert(_nodepool("b-only", "us-east-1b"))
    classes = nodeclasses.NodeClasses(cast("KubeClient", None), FakeClock())
    classes.store.upsert(_NODECLASS)
    recorder = _Recorder()
    audience = nodeclasses.ShiftAudience(state, classes, recorder)
    pools = await audience.pools()
    assert {p.name: dict(p.zones) for p in pools} == {
        "any": {"use1-az1": "us-east-1a", "use1-az2": "us-east-1b"},
        "b-only": {"use1-az1": "us-east-1a", "use1-az2": "us-east-1b"},
    }
    for event in zonalshift.events(frozenset(), frozenset({"use1-az1"}), pools):
        await audience.publish(event)
    assert recorder.posted == [("NodePool", "any", "Warning", "ZonalShiftActive")]
