"""Capacity reservations end to end on moto (through the proxy that holds the reservations)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest

from karpenter.cloud.provider import InsufficientCapacityError
from karpenter.core.model.cluster import Cluster
from karpenter.core.model.node import NodeClaim, NodeClassRef
from karpenter.core.provisioning.scheduler import solve
from karpenter.providers.aws.api import ec2nodeclass_status
from karpenter.providers.aws.cloud import sqs
from karpenter.providers.aws.controllers.capacity_type import CapacityTypeSync
from karpenter.providers.aws.controllers.interruption import InterruptionController
from karpenter.providers.aws.controllers.nodeclass import NodeClassController
from karpenter.providers.aws.core import drift
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.runtime.compose import core_options
from karpenter.settings import Settings
from tests.providers.aws.cloud.builders import Claims, Events, node_class
from tests.providers.aws.cloud.conftest import Account, Moto
from tests.providers.aws.cloud.ec2_reservations import Reservation
from tests.providers.aws.cloud.fixtures import NOW, Env, claim, env, prices
from tests.providers.aws.cloud.test_interruption import body
from tests.providers.aws.cloud.test_nodeclass_controller import Index, Store
from tests.support import builders as b

__all__ = ("env", "prices")

ZONE = "us-east-1a"
CT = "karpenter.sh/capacity-type"
OTHER_OWNER = "210987654321"


def odcr(rid: str, available: int = 2, **kw: Any) -> Reservation:
    """A targeted m5.large ODCR in us-east-1a."""
    return Reservation(
        rid, kw.pop("instance_type", "m5.large"), kw.pop("zone", ZONE), available, **kw
    )


async def select(
    env: Env, moto: Moto, *held: Reservation, terms: tuple[rsv.SelectorTerm, ...] = ()
) -> nc.EC2NodeClass:
    """Hold the reservations in the proxy and resolve a NodeClass selecting them."""
    moto.capacity.reservations.add(*held)
    terms = terms or (
        rsv.SelectorTerm(id=held[0].id),
        *tuple(rsv.SelectorTerm(id=r.id) for r in held[1:]),
    )
    resolver = replace(env.resolver, availability=env.provider.reservation_availability)
    cls = node_class(capacity_reservation_selector_terms=terms)
    cls = replace(cls, status=await resolver.status(cls, NOW))
    env.classes.put(cls)
    return cls


def reserved_claim(name: str, *ids: str) -> NodeClaim:
    """A claim pinned to reserved capacity (in ``ids`` when given)."""
    reqs: list[tuple[str, str, tuple[str, ...], int | None]] = [
        (CT, "In", ("reserved",), None),
        ("karpenter.sh/nodepool", "In", ("default",), None),
        ("node.kubernetes.io/instance-type", "In", ("m5.large", "m5.xlarge"), None),
    ]
    if ids:
        reqs.append((rsv.ID_LABEL, "In", ids, None))
    return NodeClaim(
        name,
        nodepool="default",
        requirements=tuple(reqs),
        requests={"cpu": 1000, "memory": 2 * 2**30 * 1000, "pods": 1000},
        node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default"),
    )


async def template_data(env: Env, rid: str = "") -> dict[str, Any]:
    """The launch template data of the (only, or the reservation's) cached template."""
    for name in sorted(env.provider.launch_templates.cached):
        out = await env.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
        data: dict[str, Any] = out["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        target = data.get("CapacityReservationSpecification", {}).get("CapacityReservationTarget")
        if not rid or (target or {}).get("CapacityReservationId") == rid:
            return data
    raise AssertionError(f"no launch template for {rid!r}")


def m5_large(env: Env, cls: nc.EC2NodeClass) -> Any:
    return next(t for t in env.provider.catalog(cls) if t.name == "m5.large")


@pytest.mark.asyncio
async def test_discovery_by_id_tags_and_owner(env: Env, moto: Moto) -> None:
    """Terms select by id, tags and owner; ended ones drop out, a closing block is expiring."""
    soon = NOW + dt.timedelta(minutes=30)
    held = [
        odcr("cr-0a", tags={"team": "ml"}),
        odcr("cr-0b", 5, instance_match_criteria="open", owner_id=OTHER_OWNER),
        odcr("cr-0c", tags={"team": "ml"}, end=NOW - dt.timedelta(minutes=1)),
        odcr("cr-0d", 1, tags={"team": "ml"}, reservation_type="capacity-block", end=soon),
        odcr("cr-0e", tags={"team": "ml"}, state="cancelled"),
        odcr("cr-0f", tags={"team": "web"}),
    ]
    terms = (
        rsv.SelectorTerm(tags={"team": "ml"}),
        rsv.SelectorTerm(owner_id=OTHER_OWNER, instance_match_criteria="open"),
    )
    cls = await select(env, moto, *held, terms=terms)
    found = cls.status.capacity_reservations
    assert [r.id for r in found] == ["cr-0a", "cr-0b", "cr-0d"]
    assert found[1] == rsv.CapacityReservation(
        "cr-0b", "m5.large", ZONE, OTHER_OWNER, "open", "default", None, "active"
    )
    assert (found[2].reservation_type, found[2].state) == ("capacity-block", "expiring")
    assert found[2].end_time == soon.timestamp()
    cond = cls.status.condition(nc.COND_CAPACITY_RESERVATIONS)
    assert cond is not None and cond.status == "True"
    assert cls.status.ready() == "True"
    assert env.provider.reservation_availability.counts == {"cr-0a": 2, "cr-0b": 5, "cr-0d": 1}
    doc = ec2nodeclass_status.status_doc(cls.status, "2026-11-23T00:00:00Z")
    assert doc["capacityReservations"][2]["endTime"] == "2026-11-23T00:30:00Z"
    assert ec2nodeclass_status.status_from_doc(doc).capacity_reservations == found


@pytest.mark.asyncio
async def test_unknown_id_selects_nothing(env: Env, moto: Moto) -> None:
    """An id EC2 does not know is skipped; the others still resolve and the class is Ready."""
    moto.capacity.reservations.add(odcr("cr-1a"))
    terms = (rsv.SelectorTerm(id="cr-1a"), rsv.SelectorTerm(id="cr-404"))
    cls = await select(env, moto, terms=terms)
    assert [r.id for r in cls.status.capacity_reservations] == ["cr-1a"]
    assert cls.status.ready() == "True"


@pytest.mark.asyncio
async def test_reserved_offerings_in_the_catalog(env: Env, moto: Moto) -> None:
    """The reserved type gets a near-free reserved offering and the reservation labels."""
    soon = NOW + dt.timedelta(minutes=10)
    block = odcr("cr-2b", 3, reservation_type="capacity-block", end=soon, zone="us-east-1b")
    cls = await select(env, moto, odcr("cr-2a", 2), block)
    it = m5_large(env, cls)
    reserved = {o.reservation_id: o for o in it.offerings if o.capacity_type == "reserved"}
    assert set(reserved) == {"cr-2a", "cr-2b"}
    od = next(o for o in it.offerings if o.capacity_type == "on-demand" and o.zone == ZONE)
    assert reserved["cr-2a"].price == pytest.approx(od.price / 10_000_000)
    assert (reserved["cr-2a"].available, reserved["cr-2a"].reservation_capacity) == (True, 2)
    assert not reserved["cr-2b"].available  # a capacity block about to end takes no launches
    assert it.requirements[CT].values >= {"reserved", "on-demand"}
    assert it.requirements[rsv.ID_LABEL].values == {"cr-2a", "cr-2b"}
    assert it.requirements[rsv.TYPE_LABEL].values == {"default", "capacity-block"}
    other = next(t for t in env.provider.catalog(cls) if t.name == "c5.large")
    assert other.requirements[rsv.ID_LABEL].operator == "DoesNotExist"


@pytest.mark.asyncio
async def test_reserved_launch_targets_its_reservation(env: Env, moto: Moto) -> None:
    """A reserved launch targets the reservation and takes a slot; deleting gives it back."""
    await select(env, moto, odcr("cr-3a", 2))
    got = await env.provider.create(reserved_claim("r-1", "cr-3a"))
    assert got.labels[CT] == "reserved"
    assert got.labels[rsv.ID_LABEL] == "cr-3a"
    assert got.labels[rsv.TYPE_LABEL] == "default"
    assert got.labels["node.kubernetes.io/instance-type"] == "m5.large"
    data = await template_data(env, "cr-3a")
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-3a"},
    }
    assert "InstanceMarketOptions" not in data
    assert moto.capacity.reservations.fleet_types == ["on-demand"]
    assert moto.capacity.reservations.launched == {"cr-3a": 1}
    assert env.provider.reservation_availability.get("cr-3a") == 1
    await env.provider.delete(got)
    assert env.provider.reservation_availability.get("cr-3a") == 2  # the slot is free again


@pytest.mark.asyncio
async def test_full_reservation_is_marked_and_not_retried(env: Env, moto: Moto) -> None:
    """ReservationCapacityExceeded fails the launch and zeroes the reservation's count."""
    cls = await select(env, moto, odcr("cr-4a", 1))
    moto.capacity.reservations.held["cr-4a"].available = 0  # someone else took the last slot
    with pytest.raises(InsufficientCapacityError):
        await env.provider.create(reserved_claim("r-1", "cr-4a"))
    assert moto.capacity.fleet_calls == 1  # no fallback launch into anything else
    assert env.provider.reservation_availability.get("cr-4a") == 0
    offer = next(o for o in m5_large(env, cls).offerings if o.reservation_id == "cr-4a")
    assert not offer.available
    assert not env.provider.unavailable.active(env.clock())  # on-demand pools stay usable


@pytest.mark.asyncio
async def test_capacity_block_launch(env: Env, moto: Moto) -> None:
    """A capacity block launches as a capacity-block fleet with the capacity-block market."""
    end = dt.datetime.fromtimestamp(env.clock() + 6 * 3600, dt.UTC)
    await select(env, moto, odcr("cr-5a", 1, reservation_type="capacity-block", end=end))
    got = await env.provider.create(reserved_claim("r-1"))
    assert (got.labels[rsv.ID_LABEL], got.labels[rsv.TYPE_LABEL]) == ("cr-5a", "capacity-block")
    data = await template_data(env, "cr-5a")
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert moto.capacity.reservations.fleet_types == ["capacity-block"]


@pytest.mark.asyncio
async def test_unreserved_launch_stays_out_of_open_reservations(env: Env, moto: Moto) -> None:
    """With reservations selected, on-demand templates opt out of open ODCRs; no labels leak."""
    await select(env, moto, odcr("cr-6a", 2, instance_match_criteria="open"))
    got = await env.provider.create(claim("od-1", "m5.large"))
    assert got.labels[CT] == "on-demand"
    assert rsv.ID_LABEL not in got.labels and rsv.TYPE_LABEL not in got.labels
    data = await template_data(env)
    assert data["CapacityReservationSpecification"] == {"CapacityReservationPreference": "none"}
    assert moto.capacity.reservations.launched == {}


@pytest.mark.asyncio
async def test_solver_to_launch(env: Env, moto: Moto) -> None:
    """The core places pods on the reservation until it is full, then defers; launches follow."""
    cls = await select(env, moto, odcr("cr-7a", 1))
    types = tuple(t for t in env.provider.catalog(cls) if t.name in ("m5.large", "c5.large"))
    pool = b.nodepool("default")
    cluster = Cluster(nodepools=(pool,), instance_types={"default": types})
    pods = [b.pod("a", cpu="1500m"), b.pod("b", cpu="1500m")]
    results = solve(cluster, pods, core_options(Settings()))
    [new] = results.new_claims
    assert (new.launch.capacity_type, new.launch.reservation_id) == ("reserved", "cr-7a")
    assert results.deferred == {"default/b"}
    reqs = tuple(
        (k, r.operator, tuple(sorted(r.values)), None) for k, r in sorted(new.requirements.items())
    )
    launched = await env.provider.create(replace(reserved_claim("from-solver"), requirements=reqs))
    assert (launched.labels[CT], launched.labels[rsv.ID_LABEL]) == ("reserved", "cr-7a")
    assert env.provider.reservation_availability.get("cr-7a") == 0
    after = tuple(t for t in env.provider.catalog(cls) if t.name in ("m5.large", "c5.large"))
    again = solve(
        replace(cluster, instance_types={"default": after}), pods[1:], core_options(Settings())
    )
    assert [c.launch.capacity_type != "reserved" for c in again.new_claims] == [True]
    assert not again.deferred and not again.unschedulable


@pytest.mark.asyncio
async def test_reservation_drift(env: Env, moto: Moto, account: Account) -> None:
    """An instance in a reservation the NodeClass no longer selects has drifted."""
    cls = await select(env, moto, odcr("cr-8a", 2), odcr("cr-8b", 2))
    launched = await env.provider.create(reserved_claim("r-1", "cr-8a"))
    # moto leaves the template's NIC groups off the instance; put it where EC2 would have
    await env.clients.ec2.modify_instance_attribute(
        InstanceId=launched.provider_id.rsplit("/", 1)[1], Groups=[account.security_group]
    )
    assert await env.provider.is_drifted(launched) == ""
    narrowed = node_class(capacity_reservation_selector_terms=(rsv.SelectorTerm(id="cr-8b"),))
    status = await env.resolver.status(narrowed, NOW)
    env.classes.put(replace(cls, spec=narrowed.spec, status=status))
    assert await env.provider.is_drifted(launched) == drift.CAPACITY_RESERVATION_DRIFT


@pytest.mark.asyncio
async def test_interruption_marks_reservation_full(env: Env, moto: Moto, cluster: str) -> None:
    """A capacity-reservation interruption drains the claim and zeroes its reservation."""
    await select(env, moto, odcr("cr-9a", 2))
    launched = await env.provider.create(reserved_claim("r-1", "cr-9a"))
    assert env.provider.reservation_availability.get("cr-9a") == 1
    url = (await env.clients.sqs.create_queue(QueueName=cluster))["QueueUrl"]
    instance_id = launched.provider_id.rsplit("/", 1)[1]
    await env.clients.sqs.send_message(
        QueueUrl=url, MessageBody=body("capacity-reservation", instance_id)
    )
    claims = Claims(launched)
    ctrl = InterruptionController(
        claims,
        env.provider.unavailable,
        env.clock,
        Events(),
        reservations=env.provider.reservation_availability,
    )
    await sqs.poll_once(env.clients.sqs, url, ctrl.handle, ctrl.log, wait_seconds=0)
    assert claims.deleted == ["r-1"]
    assert env.provider.reservation_availability.get("cr-9a") == 0


class Relabels:
    """NodeClaims and the relabels the capacity-type sync asked for."""

    def __init__(self, *claims: NodeClaim) -> None:
        self.items = list(claims)
        self.relabels: list[tuple[str, dict[str, str | None]]] = []

    def all(self) -> list[NodeClaim]:
        return list(self.items)

    async def relabel(self, claim: NodeClaim, labels: dict[str, str | None]) -> None:
        self.relabels.append((claim.name, labels))


@pytest.mark.asyncio
async def test_ended_reservation_demotes_the_node(env: Env, moto: Moto) -> None:
    """Once EC2 reports no reservation, the claim is relabelled on-demand without its labels."""
    await select(env, moto, odcr("cr-10a", 2))
    launched = await env.provider.create(reserved_claim("r-1", "cr-10a"))
    seen = await env.provider.get(launched.provider_id)
    assert (seen.labels[CT], seen.labels[rsv.ID_LABEL]) == ("reserved", "cr-10a")
    store = Relabels(launched, await env.provider.create(claim("od-1", "m5.large")))
    sync = CapacityTypeSync(store, env.provider)
    await sync.reconcile()
    assert store.relabels == []  # still in its reservation
    moto.capacity.reservations.end("cr-10a")
    await sync.reconcile()
    assert store.relabels == [
        ("r-1", {CT: "on-demand", rsv.ID_LABEL: None, rsv.TYPE_LABEL: None}),
    ]


@pytest.mark.asyncio
async def test_nodeclass_controller_revisits_when_a_block_turns(env: Env, moto: Moto) -> None:
    """The NodeClass is re-resolved when a capacity block turns expiring, not a minute late."""
    env.clock.t = NOW.timestamp()
    end = NOW + dt.timedelta(minutes=40, seconds=30)
    moto.capacity.reservations.add(odcr("cr-11a", 1, reservation_type="capacity-block", end=end))
    terms = (rsv.SelectorTerm(id="cr-11a"),)
    store = Store(node_class(capacity_reservation_selector_terms=terms))
    resolver = replace(env.resolver, availability=env.provider.reservation_availability)
    ctrl = NodeClassController(store, Index(), resolver, env.provider.launch_templates, env.clock)
    first = await ctrl.reconcile("default")
    assert first.requeue_after == 30.0
    [found] = store.items["default"].status.capacity_reservations
    assert found.state == "active"
    env.clock.t += 30.0
    second = await ctrl.reconcile("default")
    assert second.requeue_after == 60.0
    [found] = store.items["default"].status.capacity_reservations
    assert found.state == "expiring"
    assert store.items["default"].status.ready() == "True"


@pytest.mark.asyncio
async def test_feature_gate_off_resolves_no_reservations(env: Env, moto: Moto) -> None:
    """With ReservedCapacity off, nothing is described and the condition is not set."""
    moto.capacity.reservations.add(odcr("cr-12a"))
    cls = node_class(capacity_reservation_selector_terms=(rsv.SelectorTerm(id="cr-12a"),))
    status = await replace(env.resolver, reserved_capacity=False).status(cls, NOW)
    assert status.capacity_reservations == ()
    assert status.condition(nc.COND_CAPACITY_RESERVATIONS) is None
    assert status.ready() == "True"
    assert moto.capacity.calls["DescribeCapacityReservations"] == 0
