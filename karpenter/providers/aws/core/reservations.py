"""EC2 capacity reservations as offerings: ODCRs (open / targeted) and capacity blocks.

A reservation the EC2NodeClass selects becomes one ``reserved`` offering of its instance type
in its zone, priced a ten-millionth of on-demand so the solver prefers it over any other
capacity, labelled with its id and type. How many more instances it can start is tracked
here (``Availability``): synced from EC2's ``AvailableInstanceCount``, decremented on every
launch into it, zeroed when EC2 says it is full (ReservationCapacityExceeded, or any
insufficient-capacity answer) or interrupts it. A capacity block counts as ``expiring`` from
40 minutes before its end: EC2 reclaims its instances at the end, so Karpenter stops
launching into it and drains what runs there before that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model.instancetype import Offering
from karpenter.core.scheduling.requirements import Requirement
from karpenter.providers.aws.core.labels import GROUP

ID_LABEL = f"{GROUP}/capacity-reservation-id"
TYPE_LABEL = f"{GROUP}/capacity-reservation-type"
LABELS = (ID_LABEL, TYPE_LABEL)

TYPE_DEFAULT = "default"
TYPE_CAPACITY_BLOCK = "capacity-block"
TYPES = frozenset({TYPE_DEFAULT, TYPE_CAPACITY_BLOCK})
MATCH_CRITERIA = frozenset({"open", "targeted"})
STATE_ACTIVE = "active"
STATE_EXPIRING = "expiring"

EXPIRY_LEAD_SECONDS = 40 * 60.0
PRICE_FACTOR = 1 / 10_000_000


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """A ``capacityReservationSelectorTerms`` entry (``id`` excludes the other fields)."""

    id: str = ""
    owner_id: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    instance_match_criteria: str = ""


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """A resolved reservation, as ``status.capacityReservations`` lists it."""

    id: str
    instance_type: str
    zone: str
    owner_id: str = ""
    instance_match_criteria: str = "targeted"
    reservation_type: str = TYPE_DEFAULT
    end_time: float | None = None  # epoch seconds; None: open-ended
    state: str = STATE_ACTIVE


def state_at(reservation_type: str, end_time: float | None, now: float) -> str:
    """``expiring`` for a capacity block within 40 minutes of its end, else ``active``."""
    if (
        reservation_type == TYPE_CAPACITY_BLOCK
        and end_time is not None
        and end_time - now <= EXPIRY_LEAD_SECONDS
    ):
        return STATE_EXPIRING
    return STATE_ACTIVE


AVAILABILITY_TTL_S = 24 * 3600.0


@dataclass(slots=True)
class Availability:
    """Instances each reservation can still start, as Karpenter last knew it."""

    counts: dict[str, int] = field(default_factory=dict)
    seq: int = 0  # bumps on every change, so catalogues built earlier rebuild
    # when EC2's count (or a full-reservation verdict) last set each entry; an entry not set
    # for AVAILABILITY_TTL_S is forgotten (upstream's 24h cache), so a reservation no NodeClass
    # selects any more stops being tracked and one EC2 stopped reporting offers nothing
    set_at: dict[str, float] = field(default_factory=dict)

    def sync(self, counts: Mapping[str, int], now: float) -> None:
        """Take EC2's ``AvailableInstanceCount`` for these reservations."""
        for rid, count in counts.items():
            self.set_at[rid] = now
            if self.counts.get(rid) != count:
                self.counts[rid] = count
                self.seq += 1

    def expire(self, now: float) -> None:
        """Forget entries not set for ``AVAILABILITY_TTL_S``."""
        for rid in [r for r, at in self.set_at.items() if now - at >= AVAILABILITY_TTL_S]:
            del self.set_at[rid]
            if self.counts.pop(rid, None) is not None:
                self.seq += 1

    def get(self, rid: str) -> int:
        """The count (0 for a reservation never seen)."""
        return self.counts.get(rid, 0)

    def consume(self, rid: str) -> None:
        """An instance was launched into the reservation."""
        self.counts[rid] = max(self.get(rid) - 1, 0)
        self.seq += 1

    def release(self, rid: str) -> None:
        """An instance of the reservation is gone: its slot is free again."""
        if rid in self.counts:
            self.counts[rid] += 1
            self.seq += 1

    def exhaust(self, rid: str, now: float | None = None) -> None:
        """EC2 said the reservation is full (or interrupted it); ``now`` restarts its TTL."""
        if now is not None:
            self.set_at[rid] = now
        if self.counts.get(rid) != 0:
            self.counts[rid] = 0
            self.seq += 1

    def snapshot(self, ids: Iterable[str]) -> tuple[tuple[str, int], ...]:
        """The counts of ``ids``, sorted: a cache key for catalogues."""
        return tuple(sorted((rid, self.get(rid)) for rid in set(ids)))


def offerings(
    instance_type: str,
    reservations: Iterable[CapacityReservation],
    on_demand_price: float | None,
    available: Mapping[str, int],
    zones: Iterable[str],
) -> tuple[Offering, ...]:
    """One ``reserved`` offering per reservation of the type in an allowed zone (by id).

    Available while the reservation has room and is not expiring; the capacity it reports is
    what ``available`` says is left.
    """
    allowed = frozenset(zones)
    price = (on_demand_price or 0.0) * PRICE_FACTOR
    out = []
    for r in sorted(reservations, key=lambda r: r.id):
        if r.instance_type != instance_type or r.zone not in allowed:
            continue
        count = max(available.get(r.id, 0), 0)
        usable = count > 0 and r.state != STATE_EXPIRING
        out.append(Offering(r.zone, lbl.CAPACITY_TYPE_RESERVED, price, usable, count, r.id))
    return tuple(out)


def requirements(offers: Iterable[Offering], types_by_id: Mapping[str, str]) -> list[Requirement]:
    """The type's reservation labels: ids and types it offers, or DoesNotExist without any."""
    ids = sorted({o.reservation_id for o in offers if o.reservation_id})
    if not ids:
        return [Requirement.new(key, "DoesNotExist") for key in LABELS]
    kinds = sorted({types_by_id.get(rid, TYPE_DEFAULT) for rid in ids})
    return [Requirement.new(ID_LABEL, "In", ids), Requirement.new(TYPE_LABEL, "In", kinds)]


def types_by_id(reservations: Iterable[CapacityReservation]) -> dict[str, str]:
    """Reservation id → reservation type (default / capacity-block)."""
    return {r.id: r.reservation_type for r in reservations}


def node_labels(
    labels: Mapping[str, str], rid: str, reservations: Iterable[CapacityReservation]
) -> dict[str, str]:
    """``labels`` with the reservation labels of the one reservation launched into (or none).

    A claim may list several reservations, and a type's single values may name one it was not
    launched into; only the reservation the instance is in labels the node.
    """
    out = {k: v for k, v in labels.items() if k not in LABELS}
    if rid:
        out[ID_LABEL] = rid
        out[TYPE_LABEL] = types_by_id(reservations).get(rid, TYPE_DEFAULT)
    return out


def expiring_claims(
    claims: Iterable[tuple[str, str]], reservations: Iterable[CapacityReservation], now: float
) -> list[str]:
    """Claims (name, reservation id) in a capacity block due to end: drain them now."""
    ending = {
        r.id
        for r in reservations
        if state_at(r.reservation_type, r.end_time, now) == STATE_EXPIRING
    }
    return sorted(name for name, rid in claims if rid in ending)


def next_transition(reservations: Iterable[CapacityReservation], now: float) -> float | None:
    """Seconds until a capacity block next turns expiring or ends (None: nothing scheduled),
    so the NodeClass is re-resolved right then rather than up to a minute late."""
    waits = []
    for r in reservations:
        if r.reservation_type != TYPE_CAPACITY_BLOCK or r.end_time is None:
            continue
        for moment in (r.end_time - EXPIRY_LEAD_SECONDS, r.end_time):
            if moment > now:
                waits.append(moment - now)
    return min(waits, default=None)
