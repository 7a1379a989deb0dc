"""ARC zonal shift bookkeeping and its effect on the catalogue, in the pure core."""

from __future__ import annotations

import pytest

from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.providers.aws.core import catalog, pricing, zonalshift
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.zonalshift import Shift, ZonalShifts


def test_applied_unexpired_shifts_only() -> None:
    """A zone is shifted while its shift is applied and before its expiry."""
    shifts = ZonalShifts().update(
        [
            Shift("use1-az1", 200.0, True),
            Shift("use1-az2", 200.0, False),
            Shift("use1-az4", 50.0, True),
        ]
    )
    assert shifts.shifted(100.0) == {"use1-az1"}
    assert shifts.shifted(250.0) == frozenset()


def test_empty_answer_forgets_and_missing_zones_linger() -> None:
    """As upstream: no shifts clears all; otherwise unreported zones keep their entry."""
    shifts = ZonalShifts().update([Shift("use1-az1", 500.0, True)])
    shifts = shifts.update([Shift("use1-az2", 500.0, True)])
    assert shifts.shifted(100.0) == {"use1-az1", "use1-az2"}
    assert shifts.update([]).shifted(100.0) == frozenset()


def test_autoshift_lasts_a_day_from_the_poll() -> None:
    """An autoshift has no expiry: it counts for 24h from the poll that saw it."""
    shift = zonalshift.autoshift("use1-az1", "APPLIED", 1000.0)
    assert shift == Shift("use1-az1", 1000.0 + 24 * 3600, True)
    assert not zonalshift.autoshift("use1-az1", "NOT_APPLIED", 1000.0).applied


def test_shifted_zone_offers_nothing(ec2: dict[str, InstanceTypeInfo]) -> None:
    """Offerings in a shifted zone (matched by zone id) are unavailable; others are not."""
    prices = {"m5.large": 0.096}
    inp = catalog.CatalogInput(
        region="us-east-1",
        zones={"m5.large": ("us-east-1a", "us-east-1b")},
        prices=pricing.PriceTable("us-east-1", prices, {}, prices),
        zone_ids={"us-east-1a": "use1-az2", "us-east-1b": "use1-az4"},
        shifted_zone_ids=frozenset({"use1-az2"}),
    )
    it = catalog.instance_type(ec2["m5.large"], inp)
    assert it is not None
    on_demand = {o.zone: o.available for o in it.offerings if o.capacity_type == "on-demand"}
    assert on_demand == {"us-east-1a": False, "us-east-1b": True}


ZONES = {"use1-az1": "us-east-1a", "use1-az2": "us-east-1b"}


def _pool(name: str, *zones: str) -> zonalshift.PoolView:
    reqs = (
        Requirements([Requirement.new("topology.kubernetes.io/zone", "In", zones)])
        if zones
        else Requirements()
    )
    return zonalshift.PoolView(name, reqs, ZONES)


@pytest.mark.parametrize(
    ("before", "after", "pools", "want"),
    [
        pytest.param(
            frozenset(),
            frozenset({"use1-az1"}),
            [_pool("any")],
            [
                (
                    "any",
                    "Warning",
                    "ZonalShiftActive",
                    "Zonal shift detected: offerings in zone us-east-1a (use1-az1) are "
                    "unavailable for this NodePool",
                )
            ],
            id="detected-on-unrestricted-pool",
        ),
        pytest.param(
            frozenset({"use1-az1"}),
            frozenset(),
            [_pool("any")],
            [
                (
                    "any",
                    "Normal",
                    "ZonalShiftCleared",
                    "Zonal shift cleared: offerings in zone us-east-1a (use1-az1) are restored "
                    "for this NodePool",
                )
            ],
            id="cleared",
        ),
        pytest.param(
            frozenset(),
            frozenset({"use1-az1"}),
            [_pool("b-only", "us-east-1b"), _pool("a-too", "us-east-1a", "us-east-1b")],
            [("a-too", "Warning", "ZonalShiftActive")],
            id="only-pools-that-allow-the-zone",
        ),
        pytest.param(
            frozenset(), frozenset({"use1-az9"}), [_pool("any")], [], id="zone-without-subnet"
        ),
        pytest.param(
            frozenset({"use1-az1"}), frozenset({"use1-az1"}), [_pool("any")], [], id="no-change"
        ),
    ],
)
def test_events(
    before: frozenset[str],
    after: frozenset[str],
    pools: list[zonalshift.PoolView],
    want: list[tuple[str, ...]],
) -> None:
    """NodePools able to launch in a zone hear when it is shifted away and when that clears."""
    got = zonalshift.events(before, after, pools)
    assert [
        (e.nodepool, e.type, e.reason, e.message)[: len(w)] for e, w in zip(got, want, strict=False)
    ] == want
    assert len(got) == len(want)


def test_shifted_zone_switches_reservations_off(ec2: dict[str, InstanceTypeInfo]) -> None:
    """A capacity reservation in a shifted zone offers nothing either; one elsewhere does."""
    prices = {"m5.large": 0.096}
    inp = catalog.CatalogInput(
        region="us-east-1",
        zones={"m5.large": ("us-east-1a", "us-east-1b")},
        prices=pricing.PriceTable("us-east-1", prices, {}, prices),
        zone_ids={"us-east-1a": "use1-az2", "us-east-1b": "use1-az4"},
        shifted_zone_ids=frozenset({"use1-az2"}),
        reservations=(
            rsv.CapacityReservation("cr-a", "m5.large", "us-east-1a"),
            rsv.CapacityReservation("cr-b", "m5.large", "us-east-1b"),
        ),
        reservation_available={"cr-a": 2, "cr-b": 2},
    )
    it = catalog.instance_type(ec2["m5.large"], inp)
    assert it is not None
    reserved = {o.reservation_id: o.available for o in it.offerings if o.reservation_id}
    assert reserved == {"cr-a": False, "cr-b": True}
