"""Reserved capacity in a provisioning pass: which NodeClaim holds which capacity reservation.

A reserved offering can start only as many instances as its reservation has room for, so the
pass keeps a ledger: reservation id → instances still free, and NodeClaim placeholder hostname
→ the reservation ids it holds. A NodeClaim holds *every* reservation it could still launch
into (one unit from each), because which one it ends up in is only known at launch; as pods
narrow the claim, the reservations it can no longer use go back to the ledger. Holding is
idempotent: asking again for what a hostname already holds costs nothing.

Two modes. ``strict`` (provisioning): when a claim could use reserved offerings but every
one of them is taken, the pod waits for reserved capacity (the scheduler defers it and does
not fall back to lower-weight NodePools), and a pod that would take the last reserved option
away from a claim holding one is refused there. ``fallback`` (disruption's what-if passes):
reservations are still counted, but a claim that cannot hold one simply launches as
on-demand or spot, so a simulation never blocks on reserved capacity.

The ledger is split into a pure question (``reservable``) and a commit (``hold``), so a
target can be probed without side effects, as every other check of the pass is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.provisioning.topology import Reject
from karpenter.core.scheduling.requirements import Requirement, Requirements

STRICT = "strict"
FALLBACK = "fallback"

UNAVAILABLE_MESSAGE = (
    "compatible reserved offerings exist but every one is held by other NodeClaims; "
    "waiting for reserved capacity instead of falling back to other capacity"
)
NARROWING_MESSAGE = "would leave the NodeClaim no reserved offering it already holds"

_ANY = Requirement("", True, frozenset())


def reserved_offerings(types: Sequence[InstanceType]) -> tuple[tuple[int, Offering], ...]:
    """Available reserved offerings that name a reservation, as (type index, offering)."""
    return tuple(
        (index, o)
        for index, it in enumerate(types)
        for o in it.offerings
        if o.capacity_type == lbl.CAPACITY_TYPE_RESERVED and o.available and o.reservation_id
    )


def compatible_ids(
    offers: Sequence[tuple[int, Offering]], mask: int, reqs: Requirements, id_label: str
) -> frozenset[str]:
    """Reservation ids of ``offers`` whose type is in ``mask`` and that ``reqs`` allow."""
    zone = reqs.get(lbl.ZONE, _ANY)
    ctype = reqs.get(lbl.CAPACITY_TYPE, _ANY)
    if not ctype.has(lbl.CAPACITY_TYPE_RESERVED):
        return frozenset()
    rid = reqs.get(id_label, _ANY) if id_label else _ANY
    return frozenset(
        o.reservation_id
        for index, o in offers
        if mask >> index & 1 and zone.has(o.zone) and rid.has(o.reservation_id)
    )


@dataclass(slots=True)
class ReservationManager:
    """The pass's ledger of reservation capacity (see the module docstring)."""

    remaining: dict[str, int]
    held: dict[str, frozenset[str]] = field(default_factory=dict)

    @staticmethod
    def from_offerings(offers: Iterable[Offering]) -> ReservationManager:
        """Start from each reservation's capacity; NodePools that disagree get the smallest."""
        remaining: dict[str, int] = {}
        for o in offers:
            if o.capacity_type == lbl.CAPACITY_TYPE_RESERVED and o.reservation_id:
                known = remaining.get(o.reservation_id)
                count = max(o.reservation_capacity, 0)
                remaining[o.reservation_id] = count if known is None else min(known, count)
        return ReservationManager(remaining)

    def reservable(self, hostname: str, ids: Iterable[str]) -> frozenset[str]:
        """Those of ``ids`` the hostname holds already or that still have room."""
        mine = self.held.get(hostname, frozenset())
        return frozenset(i for i in ids if i in mine or self.remaining.get(i, 0) > 0)

    def hold(self, hostname: str, ids: frozenset[str]) -> None:
        """Make ``ids`` exactly what the hostname holds: take the new, return the dropped."""
        mine = self.held.get(hostname, frozenset())
        for rid in sorted(ids - mine):
            self.remaining[rid] = self.remaining.get(rid, 0) - 1
        for rid in sorted(mine - ids):
            self.remaining[rid] = self.remaining.get(rid, 0) + 1
        if ids:
            self.held[hostname] = ids
        else:
            self.held.pop(hostname, None)


@dataclass(slots=True)
class Reservations:
    """The ledger plus how the pass treats it (mode, the provider's reservation-id label)."""

    manager: ReservationManager
    mode: str = STRICT
    id_label: str = ""

    def choose(
        self, hostname: str, compatible: frozenset[str], held: frozenset[str]
    ) -> frozenset[str] | Reject:
        """What a claim would hold with ``compatible`` ids open to it, or why it may not."""
        reservable = self.manager.reservable(hostname, compatible)
        if self.mode == STRICT and not reservable:
            if compatible:
                return Reject("reserved", UNAVAILABLE_MESSAGE, False)
            if held:
                return Reject("reserved", NARROWING_MESSAGE, False)
        return reservable
