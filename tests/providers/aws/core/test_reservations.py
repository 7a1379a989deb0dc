"""Capacity reservations on the pure AWS side: offerings, ledger, expiry, launch planning, drift."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.api.ec2nodeclass_reservations import CapacityReservationTerm
from karpenter.providers.aws.core import drift, launch
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.core.nodeclass import AMI, Status, Subnet
from tests.support import builders as b

END = 10_000.0
LEAD = rsv.EXPIRY_LEAD_SECONDS
CT = "karpenter.sh/capacity-type"


def cr(
    rid: str,
    zone: str = "a",
    kind: str = rsv.TYPE_DEFAULT,
    *,
    instance_type: str = "m5.large",
    end_time: float | None = None,
    state: str = rsv.STATE_ACTIVE,
) -> rsv.CapacityReservation:
    return rsv.CapacityReservation(
        rid, instance_type, zone, reservation_type=kind, end_time=end_time, state=state
    )


@pytest.mark.parametrize(
    ("kind", "now", "expected"),
    [
        pytest.param(rsv.TYPE_CAPACITY_BLOCK, END - LEAD - 1, "active", id="block-41-minutes-out"),
        pytest.param(rsv.TYPE_CAPACITY_BLOCK, END - LEAD, "expiring", id="block-40-minutes-out"),
        pytest.param(rsv.TYPE_CAPACITY_BLOCK, END - 1, "expiring", id="block-last-second"),
        pytest.param(rsv.TYPE_DEFAULT, END - 1, "active", id="odcr-never-expires"),
    ],
)
def test_state_at(kind: str, now: float, expected: str) -> None:
    """Only a capacity block turns expiring, from 40 minutes before its end."""
    assert rsv.state_at(kind, END, now) == expected


def test_availability_ledger() -> None:
    """Counts follow EC2, drop on launch, zero when full, come back when an instance goes."""
    a = rsv.Availability()
    a.sync({"cr-1": 2}, 0.0)
    seq = a.seq
    a.consume("cr-1")
    assert a.get("cr-1") == 1 and a.seq > seq
    a.release("cr-1")
    a.release("cr-unknown")  # never synced: nothing to give back to
    assert a.counts == {"cr-1": 2}
    a.exhaust("cr-1")
    assert a.get("cr-1") == 0
    a.consume("cr-1")
    assert a.get("cr-1") == 0  # never negative
    seq = a.seq
    a.sync({"cr-1": 0}, 0.0)
    assert a.seq == seq  # unchanged counts keep catalogues cached


def test_availability_entries_expire_after_24h_unless_set_again() -> None:
    """Upstream's 24h cache: a count neither synced nor marked full for a day is forgotten
    (the reservation then offers nothing); a sync or a full verdict restarts the clock."""
    a = rsv.Availability()
    a.sync({"cr-1": 3, "cr-2": 3}, 0.0)
    a.consume("cr-1")  # a launch does not restart the clock
    a.exhaust("cr-2", 3600.0)  # a full verdict does
    a.expire(rsv.AVAILABILITY_TTL_S - 1)
    assert a.counts == {"cr-1": 2, "cr-2": 0}
    seq = a.seq
    a.expire(rsv.AVAILABILITY_TTL_S)
    assert a.counts == {"cr-2": 0} and a.get("cr-1") == 0 and a.seq > seq
    a.sync({"cr-1": 4}, rsv.AVAILABILITY_TTL_S + 10)
    a.expire(3600.0 + rsv.AVAILABILITY_TTL_S)
    assert a.counts == {"cr-1": 4}


def test_offerings_price_availability_and_scope() -> None:
    """One offering per reservation of the type in an allowed zone, priced 1e-7 of on-demand."""
    found = [
        cr("cr-1"),
        cr("cr-2", "b", state=rsv.STATE_EXPIRING, end_time=END),
        cr("cr-3", instance_type="c5.large"),
        cr("cr-4", "z"),
        cr("cr-5"),
    ]
    offers = rsv.offerings("m5.large", found, 0.096, {"cr-1": 3, "cr-2": 1}, ["a", "b"])
    assert [(o.reservation_id, o.zone, o.available, o.reservation_capacity) for o in offers] == [
        ("cr-1", "a", True, 3),
        ("cr-2", "b", False, 1),
        ("cr-5", "a", False, 0),
    ]
    assert offers[0].price == pytest.approx(0.096e-7)
    assert {o.capacity_type for o in offers} == {"reserved"}
    reqs = rsv.requirements(offers, {"cr-2": rsv.TYPE_CAPACITY_BLOCK})
    assert [(r.key, r.operator, sorted(r.values)) for r in reqs] == [
        (rsv.ID_LABEL, "In", ["cr-1", "cr-2", "cr-5"]),
        (rsv.TYPE_LABEL, "In", ["capacity-block", "default"]),
    ]
    assert [r.operator for r in rsv.requirements((), {})] == ["DoesNotExist", "DoesNotExist"]


def test_expiring_claims_and_next_transition() -> None:
    """Claims in a closing block are due; the NodeClass is revisited when a block changes."""
    found = [
        cr("cr-b", kind=rsv.TYPE_CAPACITY_BLOCK, end_time=END),
        cr("cr-d", end_time=END),
        cr("cr-late", kind=rsv.TYPE_CAPACITY_BLOCK, end_time=END + 3600),
    ]
    claims = [("n1", "cr-b"), ("n2", "cr-d"), ("n3", "cr-late"), ("n0", "cr-b")]
    assert rsv.expiring_claims(claims, found, END - LEAD) == ["n0", "n1"]
    assert rsv.expiring_claims(claims, found, END - LEAD - 1) == []
    assert rsv.next_transition(found, END - LEAD - 5) == 5
    assert rsv.next_transition(found, END - 5) == 5
    assert rsv.next_transition([cr("cr-d", end_time=END)], 0) is None


# ---- launch planning --------------------------------------------------------------------


def _type(name: str, *reserved: tuple[str, str, int]) -> InstanceType:
    base = b.instance_type(name, 2, 8, zones=("a", "b"), capacity_types=("on-demand", "spot"))
    extra = tuple(
        Offering(zone, "reserved", 0.0000001, True, count, rid) for rid, zone, count in reserved
    )
    return replace(base, offerings=(*base.offerings, *extra))


def _claim(*reqs: tuple[str, str, tuple[str, ...]]) -> NodeClaim:
    return NodeClaim("c", requirements=tuple((k, op, v, None) for k, op, v in reqs))


SUBNETS = (Subnet("subnet-a", "a", "", 100), Subnet("subnet-b", "b", "", 100))
IMAGES = (AMI("ami-1"),)


def test_plan_prefers_reserved_and_takes_the_roomiest_per_zone() -> None:
    """Reserved beats spot; per zone the reservation with most room left is the override."""
    it = _type("m5.large", ("cr-a1", "a", 1), ("cr-a2", "a", 3), ("cr-b1", "b", 2))
    p = launch.plan(_claim((CT, "In", ("reserved", "spot"))), [it], SUBNETS, IMAGES)
    assert (p.capacity_type, p.fleet_capacity_type, p.reservation_type) == (
        "reserved",
        "on-demand",
        "default",
    )
    assert sorted((o.zone, o.reservation_id, o.subnet_id) for o in p.overrides) == [
        ("a", "cr-a2", "subnet-a"),
        ("b", "cr-b1", "subnet-b"),
    ]


def test_plan_honours_the_claims_reservation_ids() -> None:
    """A claim narrowed to one reservation id launches only into it."""
    it = _type("m5.large", ("cr-a1", "a", 1), ("cr-a2", "a", 3))
    claim = _claim((CT, "In", ("reserved",)), (rsv.ID_LABEL, "In", ("cr-a1",)))
    p = launch.plan(claim, [it], SUBNETS, IMAGES)
    assert [o.reservation_id for o in p.overrides] == ["cr-a1"]


def test_plan_capacity_block_launches_one_block() -> None:
    """Capacity blocks are a fleet of their own: one block, capacity-block target type."""
    small = _type("m5.large", ("cr-blk1", "a", 1))
    big = replace(_type("m5.xlarge", ("cr-blk2", "b", 1)))
    kinds = {"cr-blk1": rsv.TYPE_CAPACITY_BLOCK, "cr-blk2": rsv.TYPE_CAPACITY_BLOCK}
    claim = _claim((CT, "In", ("reserved",)))
    p = launch.plan(claim, [big, small], SUBNETS, IMAGES, reservation_types=kinds)
    assert (p.fleet_capacity_type, p.reservation_type) == ("capacity-block", "capacity-block")
    assert [(o.instance_type, o.reservation_id) for o in p.overrides] == [("m5.large", "cr-blk1")]


def test_plan_default_reservations_win_ties_over_blocks() -> None:
    """At equal price a default ODCR is used before a capacity block."""
    it = _type("m5.large", ("cr-odcr", "a", 1), ("cr-blk", "b", 1))
    kinds = {"cr-blk": rsv.TYPE_CAPACITY_BLOCK}
    p = launch.plan(
        _claim((CT, "In", ("reserved",))), [it], SUBNETS, IMAGES, reservation_types=kinds
    )
    assert [o.reservation_id for o in p.overrides] == ["cr-odcr"]


def test_plan_without_reserved_capacity_falls_to_spot() -> None:
    """A claim that does not allow reserved never launches into a reservation."""
    it = _type("m5.large", ("cr-a1", "a", 1))
    p = launch.plan(_claim((CT, "In", ("spot", "on-demand"))), [it], SUBNETS, IMAGES)
    assert p.capacity_type == "spot"
    assert {o.reservation_id for o in p.overrides} == {""}


def test_reservation_drift() -> None:
    """An instance in a reservation missing from status has drifted; others have not."""
    status = Status(capacity_reservations=(cr("cr-keep"),))
    facts = drift.InstanceFacts("ami-1", "subnet-a", frozenset(), "cr-gone")
    assert drift.drift_reason(facts, status, None, {}, {}) == drift.CAPACITY_RESERVATION_DRIFT
    kept = replace(facts, reservation_id="cr-keep")
    assert drift.drift_reason(kept, status, None, {}, {}) == ""
    assert drift.drift_reason(replace(facts, reservation_id=""), status, None, {}, {}) == ""


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param({}, "expected at least one", id="empty"),
        pytest.param(
            {"id": "cr-1", "ownerID": "123456789012"}, "mutually exclusive", id="id-and-owner"
        ),
        pytest.param({"id": "sg-1"}, "pattern", id="bad-id"),
        pytest.param({"ownerID": "12", "tags": {"a": "b"}}, "pattern", id="bad-owner"),
        pytest.param({"instanceMatchCriteria": "closed"}, "open", id="bad-criteria"),
        pytest.param({"tags": {"a": ""}}, "empty tag", id="empty-tag"),
    ],
)
def test_selector_term_rules(raw: dict[str, object], message: str) -> None:
    """The CRD's rules for capacityReservationSelectorTerms, with its messages."""
    with pytest.raises(ValidationError, match=message):
        CapacityReservationTerm.model_validate(raw)


def test_selector_term_to_core() -> None:
    """A valid term becomes the core term."""
    term = CapacityReservationTerm.model_validate(
        {"ownerID": "123456789012", "instanceMatchCriteria": "open", "tags": {"team": "ml"}}
    )
    assert term.to_core() == rsv.SelectorTerm("", "123456789012", {"team": "ml"}, "open")
