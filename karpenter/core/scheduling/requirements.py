"""Label requirements: the set algebra behind node selectors, node affinity and NodePools.

A ``Requirement`` is the set of label values a key may take: an explicit set (``In``), the
complement of a set (``NotIn``, ``Exists``), optionally bounded by integers (``Gt``, ``Lt``,
``Gte``, ``Lte``), or nothing at all (``DoesNotExist``). ``Requirements`` maps keys to
requirements; a key it does not mention allows anything. Intersection, compatibility and the
error messages follow Kubernetes and Karpenter semantics; all values are immutable and hashable
so the solver can memoize on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from karpenter.core.model.labels import normalize_key

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
GTE = "Gte"
LTE = "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)


class RequirementError(ValueError):
    """A requirement is malformed (unknown operator, missing or non-integer values)."""


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """The allowed values of one label key."""

    key: str
    complement: bool
    values: frozenset[str]
    gte: int | None = None
    lte: int | None = None
    min_values: int | None = None

    @staticmethod
    def new(
        key: str, operator: str, values: Iterable[str] = (), min_values: int | None = None
    ) -> Requirement:
        """Build from a NodeSelectorRequirement-style triple (raises RequirementError)."""
        vals = tuple(values)
        key = normalize_key(key)
        if operator == IN:
            return Requirement(key, False, frozenset(vals), min_values=min_values)
        if operator == NOT_IN:
            return Requirement(key, True, frozenset(vals), min_values=min_values)
        if operator == EXISTS:
            return Requirement(key, True, frozenset(), min_values=min_values)
        if operator == DOES_NOT_EXIST:
            return Requirement(key, False, frozenset(), min_values=min_values)
        if operator in (GT, LT, GTE, LTE):
            if len(vals) != 1 or _as_int(vals[0]) is None:
                raise RequirementError(
                    f"operator {operator} of key {key!r} needs exactly one integer value"
                )
            bound = int(vals[0])
            gte = {GT: bound + 1, GTE: bound}.get(operator)
            lte = {LT: bound - 1, LTE: bound}.get(operator)
            return Requirement(key, True, frozenset(), gte, lte, min_values)
        raise RequirementError(f"unknown operator {operator!r} for key {key!r}")

    @property
    def operator(self) -> str:
        """The operator this set reads as (bounded complements read as Exists)."""
        if self.complement:
            return NOT_IN if self.values else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def is_empty(self) -> bool:
        """True when no value satisfies it (DoesNotExist, or emptied by an intersection)."""
        return not self.complement and not self.values

    def _in_bounds(self, value: str) -> bool:
        if self.gte is None and self.lte is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        return (self.gte is None or number >= self.gte) and (self.lte is None or number <= self.lte)

    def has(self, value: str) -> bool:
        """True when ``value`` satisfies this requirement."""
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values and self._in_bounds(value)

    def intersection(self, other: Requirement) -> Requirement:
        """The values allowed by both requirements (bounds tighten, minValues takes the max)."""
        gte = _max_opt(self.gte, other.gte)
        lte = _min_opt(self.lte, other.lte)
        min_values = _max_opt(self.min_values, other.min_values)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False, frozenset(), min_values=min_values)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, gte, lte, min_values)
        if self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        result = Requirement(self.key, False, values, gte, lte, min_values)
        if gte is not None or lte is not None:
            values = frozenset(v for v in values if result._in_bounds(v))
            result = Requirement(self.key, False, values, None, None, min_values)
        return result

    def any_value(self) -> str:
        """A deterministic value satisfying the requirement ("" when none exists)."""
        if not self.complement:
            return min(self.values) if self.values else ""
        if self.gte is not None or self.lte is not None:
            candidate = self.gte if self.gte is not None else min(self.lte or 0, 0)
            while str(candidate) in self.values:
                candidate += 1
            return str(candidate) if self._in_bounds(str(candidate)) else ""
        index = 0
        while f"value-{index}" in self.values:
            index += 1
        return f"value-{index}"

    def describe(self) -> str:
        """Human form, e.g. ``karpenter.sh/capacity-type In [spot]``."""
        op = self.operator
        bounds = []
        if self.gte is not None:
            bounds.append(f">={self.gte}")
        if self.lte is not None:
            bounds.append(f"<={self.lte}")
        if bounds and not self.values:
            return f"{self.key} {' '.join(bounds)}"
        if op in (EXISTS, DOES_NOT_EXIST):
            return f"{self.key} {op}"
        return f"{self.key} {op} [{', '.join(sorted(self.values))}]"


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


class Requirements(Mapping[str, Requirement]):
    """An immutable, hashable map of label key to Requirement (a missing key allows anything)."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Iterable[Requirement] = ()) -> None:
        merged: dict[str, Requirement] = {}
        for req in items:
            existing = merged.get(req.key)
            merged[req.key] = req if existing is None else existing.intersection(req)
        self._items = merged
        self._hash: int | None = None

    @staticmethod
    def from_labels(labels: Mapping[str, str]) -> Requirements:
        """Each label becomes ``key In [value]``."""
        return Requirements(Requirement(k, False, frozenset((v,))) for k, v in labels.items())

    def __getitem__(self, key: str) -> Requirement:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.values()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._items == other._items

    def __repr__(self) -> str:
        return f"Requirements({self.describe()})"

    def get_or_exists(self, key: str) -> Requirement:
        """The requirement on ``key``, or ``Exists`` semantics (anything) when unset."""
        return self._items.get(key) or Requirement(key, True, frozenset())

    def intersect(self, other: Requirements) -> Requirements:
        """Both sets of requirements at once (per-key intersection)."""
        if not other:
            return self
        if not self:
            return other
        merged = dict(self._items)
        for key, req in other._items.items():
            existing = merged.get(key)
            merged[key] = req if existing is None else existing.intersection(req)
        result = Requirements()
        result._items = merged
        return result

    def without(self, keys: Iterable[str]) -> Requirements:
        """A copy without the given keys."""
        drop = set(keys)
        return Requirements(r for k, r in self._items.items() if k not in drop)

    def conflicts(self, other: Requirements) -> list[str]:
        """Why no node can satisfy both (empty list: they intersect).

        For keys present in both, the intersection must be non-empty unless both sides forbid
        values (NotIn/DoesNotExist), since a node without the label satisfies both.
        """
        errors = []
        small, large = (self, other) if len(self) <= len(other) else (other, self)
        for key, a in small._items.items():
            b = large._items.get(key)
            if b is None or not a.intersection(b).is_empty():
                continue
            if a.operator in (NOT_IN, DOES_NOT_EXIST) and b.operator in (NOT_IN, DOES_NOT_EXIST):
                continue
            mine, theirs = (a, b) if small is self else (b, a)
            errors.append(f"{theirs.describe()} vs {mine.describe()}")
        return errors

    def undefined_keys(self, other: Requirements, allow_undefined: frozenset[str]) -> list[str]:
        """Keys ``other`` requires a value for that ``self`` does not define (sorted)."""
        return sorted(
            key
            for key, req in other._items.items()
            if key not in self._items
            and key not in allow_undefined
            and req.operator not in (NOT_IN, DOES_NOT_EXIST)
        )

    def compatible(self, other: Requirements, allow_undefined: frozenset[str]) -> bool:
        """Fast boolean form of :meth:`compatibility_errors`."""
        items = self._items
        for key, req in other._items.items():
            mine = items.get(key)
            if mine is None:
                if key in allow_undefined or req.operator in (NOT_IN, DOES_NOT_EXIST):
                    continue
                return False
            if mine.intersection(req).is_empty() and not (
                mine.operator in (NOT_IN, DOES_NOT_EXIST)
                and req.operator in (NOT_IN, DOES_NOT_EXIST)
            ):
                return False
        return True

    def compatibility_errors(
        self, other: Requirements, allow_undefined: frozenset[str]
    ) -> list[str]:
        """Why a pod's requirements ``other`` cannot be met on ``self`` (empty: compatible)."""
        errors = [
            f"label {key!r} does not have known values"
            for key in self.undefined_keys(other, allow_undefined)
        ]
        return errors + self.conflicts(other)

    def labels(self, skip: frozenset[str] = frozenset()) -> dict[str, str]:
        """A label value for every key that requires one (``DoesNotExist`` keys get none)."""
        result = {}
        for key in sorted(self._items):
            if key in skip:
                continue
            value = self._items[key].any_value()
            if value:
                result[key] = value
        return result

    def single_values(self) -> dict[str, str]:
        """Keys whose requirement allows exactly one value, with that value."""
        return {
            k: next(iter(r.values))
            for k, r in self._items.items()
            if not r.complement and len(r.values) == 1
        }

    def describe(self) -> str:
        """Human form, keys sorted."""
        return ", ".join(self._items[k].describe() for k in sorted(self._items))


def from_selector_terms(
    expressions: Iterable[tuple[str, str, tuple[str, ...], int | None]],
) -> Requirements:
    """Requirements from ``(key, operator, values, minValues)`` tuples (raises RequirementError)."""
    return Requirements(Requirement.new(k, op, vals, mv) for k, op, vals, mv in expressions)
