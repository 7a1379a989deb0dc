"""A NodePool's instance types indexed as bitmasks, so filtering a claim's options is cheap.

Every question the solver asks of instance types ("which are compatible with these
requirements, have an available offering there, and fit these requests?") is answered by AND-ing
Python integers used as bitsets over the pool's types. Per-key requirement masks, per-resource
threshold masks and per-(zone, capacity type) offering masks are built once per pass; answers are
memoized on the (hashable) requirements. This turns O(types) Python loops into a handful of
big-integer operations, which is what makes a 20k-pod pass fast.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpenter.core.model import labels as lbl
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.resources import Resources
from karpenter.core.provisioning import reservations
from karpenter.core.scheduling.requirements import Requirement, Requirements

_ANY = Requirement("", True, frozenset())


CAPACITY_PRIORITY = {lbl.CAPACITY_TYPE_RESERVED: 0, lbl.CAPACITY_TYPE_SPOT: 1}


def offer_rank(offering: Offering) -> tuple[float, int]:
    """Cheaper first; at equal price reserved, then spot, then on-demand."""
    return (offering.price, CAPACITY_PRIORITY.get(offering.capacity_type, 2))


@dataclass(frozen=True, slots=True)
class Priced:
    """Types ordered by their cheapest usable offering, with the capacity types usable."""

    order: tuple[tuple[int, Offering], ...]
    capacity_types: tuple[frozenset[str], ...]

    @staticmethod
    def build(types: Sequence[InstanceType], zone: Requirement, ctype: Requirement) -> Priced:
        """Rank every type by (price, reserved < spot < on-demand, catalog order)."""
        ranked = []
        usable: list[frozenset[str]] = []
        for index, it in enumerate(types):
            offers = [
                o
                for o in it.offerings
                if o.available and zone.has(o.zone) and ctype.has(o.capacity_type)
            ]
            usable.append(frozenset(o.capacity_type for o in offers))
            if offers:
                best = min(
                    offers, key=lambda o: (o.price, CAPACITY_PRIORITY.get(o.capacity_type, 2))
                )
                key = (best.price, CAPACITY_PRIORITY.get(best.capacity_type, 2), index)
                ranked.append((key, index, best))
        ranked.sort(key=lambda r: r[0])
        return Priced(tuple((i, o) for _, i, o in ranked), tuple(usable))


@dataclass(frozen=True, slots=True)
class Cheapest:
    """A claim's launch options: the first types of its mask by price."""

    order: tuple[tuple[int, Offering], ...]  # (type index, its cheapest usable offering)
    types: tuple[InstanceType, ...]
    capacity_types: frozenset[str]  # what they may launch as
    pinned: Requirements  # instance type among them, capacity type among those


@dataclass(frozen=True, slots=True)
class _Threshold:
    values: list[int]
    masks: list[int]


def offering_requirements(offering: Offering) -> Requirements:
    """An offering's own labels as requirements (zone and capacity type)."""
    return Requirements.from_labels(
        {lbl.ZONE: offering.zone, lbl.CAPACITY_TYPE: offering.capacity_type}
    )


def full_requirements(it: InstanceType) -> Requirements:
    """The type's requirements plus its name and the zones / capacity types it is offered in."""
    extra = [
        Requirement(lbl.INSTANCE_TYPE, False, frozenset((it.name,))),
        Requirement(lbl.ZONE, False, frozenset(o.zone for o in it.offerings)),
        Requirement(lbl.CAPACITY_TYPE, False, frozenset(o.capacity_type for o in it.offerings)),
    ]
    present = set(it.requirements)
    return it.requirements.intersect(Requirements(r for r in extra if r.key not in present))


class Catalog:
    """Instance types of one NodePool, in a fixed order, with bitmask indexes."""

    def __init__(self, types: Sequence[InstanceType]) -> None:
        self.types = tuple(types)
        self.requirements = tuple(full_requirements(t) for t in self.types)
        self.allocatable = tuple(t.allocatable for t in self.types)
        self.all = (1 << len(self.types)) - 1
        self._key_masks: dict[Requirement, int] = {}
        self._req_masks: dict[Requirements, int] = {}
        self._offer_masks: dict[tuple[Requirement, Requirement], int] = {}
        self._thresholds: dict[str, _Threshold] = {}
        self._pairs: dict[tuple[str, str], int] = {}
        self._priced: dict[tuple[Requirement, Requirement], Priced] = {}
        self._cheapest: dict[tuple[Requirement, Requirement, int, int], Cheapest] = {}
        # Empty for almost every pool, which keeps reservation checks off the hot path.
        self.reserved = reservations.reserved_offerings(self.types)
        for index, it in enumerate(self.types):
            for o in it.offerings:
                if o.available:
                    pair = (o.zone, o.capacity_type)
                    self._pairs[pair] = self._pairs.get(pair, 0) | (1 << index)

    def indices(self, mask: int) -> list[int]:
        """Set bit positions of ``mask``, ascending."""
        out = []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return out

    def key_mask(self, req: Requirement) -> int:
        """Types whose requirement on ``req.key`` intersects ``req`` (undefined keys pass)."""
        cached = self._key_masks.get(req)
        if cached is not None:
            return cached
        mask = 0
        for index, reqs in enumerate(self.requirements):
            mine = reqs.get(req.key)
            if mine is None or not mine.intersection(req).is_empty():
                mask |= 1 << index
            elif mine.operator in ("NotIn", "DoesNotExist") and req.operator in (
                "NotIn",
                "DoesNotExist",
            ):
                mask |= 1 << index
        self._key_masks[req] = mask
        return mask

    def compatible(self, reqs: Requirements) -> int:
        """Types compatible with ``reqs`` and with an available offering they allow."""
        cached = self._req_masks.get(reqs)
        if cached is not None:
            return cached
        mask = self.all
        for req in reqs.values():
            mask &= self.key_mask(req)
            if not mask:
                break
        mask &= self.offerings(reqs)
        self._req_masks[reqs] = mask
        return mask

    def offerings(self, reqs: Requirements) -> int:
        """Types with an available offering in a zone and capacity type ``reqs`` allow."""
        zone = reqs.get(lbl.ZONE, _ANY)
        ctype = reqs.get(lbl.CAPACITY_TYPE, _ANY)
        cached = self._offer_masks.get((zone, ctype))
        if cached is not None:
            return cached
        mask = 0
        for (z, c), pair_mask in self._pairs.items():
            if zone.has(z) and ctype.has(c):
                mask |= pair_mask
        self._offer_masks[(zone, ctype)] = mask
        return mask

    def priced(self, reqs: Requirements) -> Priced:
        """Types by their cheapest offering ``reqs`` allow (memoized per zone/capacity type)."""
        zone = reqs.get(lbl.ZONE, _ANY)
        ctype = reqs.get(lbl.CAPACITY_TYPE, _ANY)
        cached = self._priced.get((zone, ctype))
        if cached is None:
            cached = Priced.build(self.types, zone, ctype)
            self._priced[(zone, ctype)] = cached
        return cached

    def cheapest(self, reqs: Requirements, mask: int, limit: int) -> Cheapest:
        """The first ``limit`` types of ``mask`` in ``priced(reqs)`` order, their types, and
        the requirements that pin a launch to them (memoized: every what-if of a plan asks)."""
        zone = reqs.get(lbl.ZONE, _ANY)
        ctype = reqs.get(lbl.CAPACITY_TYPE, _ANY)
        key = (zone, ctype, mask, limit)
        cached = self._cheapest.get(key)
        if cached is None:
            priced = self.priced(reqs)
            out: list[tuple[int, Offering]] = []
            for index, offer in priced.order:  # one entry per type
                if mask >> index & 1:
                    out.append((index, offer))
                    if len(out) == limit:
                        break
            ctypes = frozenset().union(*(priced.capacity_types[i] for i, _ in out))
            kept = tuple(self.types[i] for i, _ in out)
            pins = Requirements(
                (
                    Requirement(lbl.INSTANCE_TYPE, False, frozenset(it.name for it in kept)),
                    Requirement(lbl.CAPACITY_TYPE, False, ctypes),
                )
            )
            cached = self._cheapest[key] = Cheapest(tuple(out), kept, ctypes, pins)
        return cached

    def fits(self, requests: Resources) -> int:
        """Types whose allocatable covers every requested resource."""
        mask = self.all
        for name, value in requests.items():
            if value <= 0:
                continue
            threshold = self._thresholds.get(name)
            if threshold is None:
                threshold = self._build_threshold(name)
            i = bisect_left(threshold.values, value)
            if i == len(threshold.values):
                return 0
            mask &= threshold.masks[i]
            if not mask:
                return 0
        return mask

    def _build_threshold(self, name: str) -> _Threshold:
        pairs = sorted((a.get(name, 0), i) for i, a in enumerate(self.allocatable))
        values: list[int] = []
        masks: list[int] = []
        suffix = 0
        for value, index in reversed(pairs):
            suffix |= 1 << index
            if values and values[-1] == value:
                masks[-1] = suffix
            else:
                values.append(value)
                masks.append(suffix)
        values.reverse()
        masks.reverse()
        threshold = _Threshold(values, masks)
        self._thresholds[name] = threshold
        return threshold

    def distinct_values(self, mask: int, key: str) -> int:
        """How many distinct values of ``key`` the types in ``mask`` offer (for minValues)."""
        seen: set[str] = set()
        for index in self.indices(mask):
            req = self.requirements[index].get(key)
            if req is not None and not req.complement:
                seen |= req.values
        return len(seen)

    def max_allocatable(self, mask: int, names: Sequence[str]) -> dict[str, int]:
        """Largest allocatable of each named resource among ``mask``'s types (for reasons)."""
        result = dict.fromkeys(names, 0)
        for index in self.indices(mask):
            alloc: Mapping[str, int] = self.allocatable[index]
            for name in names:
                result[name] = max(result[name], alloc.get(name, 0))
        return result


def _capacity_prefix(types: Sequence[InstanceType], name: str) -> tuple[list[int], list[int]]:
    pairs = sorted((t.capacity.get(name, 0), i) for i, t in enumerate(types))
    values: list[int] = []
    masks: list[int] = []
    prefix = 0
    for value, index in pairs:
        prefix |= 1 << index
        if values and values[-1] == value:
            masks[-1] = prefix
        else:
            values.append(value)
            masks.append(prefix)
    return values, masks


class CapacityIndex:
    """Which types' capacity stays within a NodePool's remaining limits."""

    def __init__(self, types: Sequence[InstanceType]) -> None:
        self._types = types
        self._index: dict[str, tuple[list[int], list[int]]] = {}
        self.all = (1 << len(types)) - 1

    def within(self, remaining: Mapping[str, int]) -> int:
        """Types whose capacity is ≤ ``remaining`` for every limited resource."""
        mask = self.all
        for name, value in remaining.items():
            if name == "nodes":
                continue
            index = self._index.get(name)
            if index is None:
                index = self._index[name] = _capacity_prefix(self._types, name)
            values, masks = index
            i = bisect_right(values, value)
            mask &= masks[i - 1] if i else 0
        return mask

    def max_capacity(self, indices: Sequence[int], names: Sequence[str]) -> dict[str, int]:
        """Per-resource maximum capacity among the given types."""
        result = dict.fromkeys(names, 0)
        for i in indices:
            cap = self._types[i].capacity
            for name in names:
                result[name] = max(result[name], cap.get(name, 0))
        return result
