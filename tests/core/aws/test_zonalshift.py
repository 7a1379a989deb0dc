"""ARC zonal shift bookkeeping and its effect on the catalogue, in the pure core."""

from __future__ import annotations

from karpenter.core.aws import catalog, pricing, zonalshift
from karpenter.core.aws.ec2types import InstanceTypeInfo
from karpenter.core.aws.zonalshift import Shift, ZonalShifts


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
