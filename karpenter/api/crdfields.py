"""Field types shared by Karpenter's CRDs: requirements, taints, durations and label rules.

These carry the OpenAPI patterns and CEL rules that the apiserver enforces from ``config/crd``
(``karpenter.sh/v1`` NodePool and NodeClaim, ``v1alpha1`` NodeOverlay), so a manifest that the
cluster would refuse is refused here too, with the field named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from karpenter.core.model import labels as lbl
from karpenter.core.model.pod import SelectorTerm
from karpenter.core.scheduling.taints import Taint

DURATION = re.compile(r"^([0-9]+(s|m|h))+$")
_UNITS = {"s": 1, "m": 60, "h": 3600}
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
NUMERIC_OPERATORS = ("Gt", "Lt", "Gte", "Lte")


def duration_seconds(text: str) -> float:
    """A Kubernetes duration like ``720h`` or ``1h30m`` in seconds."""
    return float(sum(int(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)(s|m|h)", text)))


def nillable_seconds(text: str | None) -> float | None:
    """A duration in seconds, with ``Never`` (or absence) as None."""
    if text is None or text == "Never":
        return None
    return duration_seconds(text)


def check_duration(value: str | None, *, never: bool) -> str | None:
    """Validate a duration string (``Never`` allowed when ``never``)."""
    if value is None or (never and value == "Never"):
        return value
    if not DURATION.match(value):
        example = "720h, or Never" if never else "48h"
        raise ValueError(f"invalid duration {value!r} (e.g. {example})")
    return value


def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``prefix/name``), or None."""
    prefix, _, name = key.rpartition("/")
    if not name or len(name) > 63 or not _NAME.match(name):
        return f"invalid key {key!r} (a qualified name such as example.com/name)"
    if prefix and (len(prefix) > 253 or not _PREFIX.match(prefix)):
        return f"invalid key prefix {prefix!r} (a DNS subdomain)"
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a label value, or None."""
    if len(value) > 63 or not _VALUE.match(value):
        return f"invalid label value {value!r}"
    return None


def restricted(key: str, *, allow_nodepool: bool) -> str | None:
    """Why a label key is refused in requirements or template labels, or None."""
    if key == lbl.HOSTNAME:
        return f"label {key} is restricted"
    if key in (lbl.CAPACITY_TYPE, lbl.NODEPOOL):
        return None if allow_nodepool or key == lbl.CAPACITY_TYPE else f"label {key} is restricted"
    domain = lbl.label_domain(key)
    if domain == "karpenter.sh" or domain.endswith(".karpenter.sh"):
        return f"label domain {domain} is restricted"
    return None


def check_labels(labels: Mapping[str, str], *, allow_nodepool: bool) -> None:
    """Template labels: qualified keys, valid values, no restricted keys."""
    for key, value in labels.items():
        why = (
            qualified_name_problem(key)
            or label_value_problem(value)
            or restricted(key, allow_nodepool=allow_nodepool)
        )
        if why:
            raise ValueError(f"{key}: {why}")


class Model(BaseModel):
    """Base of every CRD model: immutable, camelCase aliases, unknown fields ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Requirement(Model):
    """A NodeSelectorRequirement with ``minValues``, as Karpenter's CRDs validate it."""

    key: str = Field(max_length=316)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    values: list[str] = Field(default_factory=list)
    min_values: int | None = Field(default=None, alias="minValues", ge=1, le=50)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        why = qualified_name_problem(value)
        if why:
            raise ValueError(why)
        return value

    @model_validator(mode="after")
    def _valid(self) -> Requirement:
        if self.operator in NUMERIC_OPERATORS and (
            len(self.values) != 1 or not self.values[0].isdigit()
        ):
            raise ValueError(f"values: operator {self.operator} needs one non-negative integer")
        for v in self.values:
            why = label_value_problem(v)
            if why:
                raise ValueError(f"values: {why}")
        if self.operator == "In" and not self.values:
            raise ValueError("values: operator In needs at least one value")
        if self.operator == "In" and self.min_values and len(self.values) < self.min_values:
            raise ValueError(f"minValues {self.min_values} exceeds the {len(self.values)} values")
        return self


class ClaimRequirement(Requirement):
    """A requirement where ``karpenter.sh/nodepool`` may appear (NodeClaim, NodeOverlay)."""

    @field_validator("key")
    @classmethod
    def _not_restricted(cls, value: str) -> str:
        why = restricted(value, allow_nodepool=True)
        if why:
            raise ValueError(why)
        return value


class PoolRequirement(Requirement):
    """A NodePool template requirement (``karpenter.sh/nodepool`` is refused)."""

    @field_validator("key")
    @classmethod
    def _not_restricted(cls, value: str) -> str:
        why = restricted(value, allow_nodepool=False)
        if why:
            raise ValueError(why)
        return value

    @model_validator(mode="after")
    def _capacity_type(self) -> PoolRequirement:
        if self.key == lbl.CAPACITY_TYPE and self.operator == "In":
            valid = [v for v in self.values if v in lbl.CAPACITY_TYPES]
            if not valid:
                raise ValueError(f"values: no valid capacity type among {self.values}")
            if self.min_values and len(valid) < self.min_values:
                raise ValueError(f"minValues {self.min_values} exceeds the valid capacity types")
        return self


def term(reqs: Sequence[Requirement]) -> SelectorTerm:
    """Requirements as the core's selector term."""
    return tuple((r.key, r.operator, tuple(r.values), r.min_values) for r in reqs)


class TaintField(Model):
    """A node taint."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        why = qualified_name_problem(value)
        if why:
            raise ValueError(why)
        return value

    @field_validator("value")
    @classmethod
    def _value(cls, value: str) -> str:
        why = label_value_problem(value)
        if why:
            raise ValueError(why)
        return value

    def to_core(self) -> Taint:
        """The core taint."""
        return Taint(self.key, self.effect, self.value)


def unique_taints(taints: list[TaintField], startup: list[TaintField]) -> None:
    """No two taints (across taints and startupTaints) share key and effect."""
    seen: set[tuple[str, str]] = set()
    for t in [*taints, *startup]:
        if (t.key, t.effect) in seen:
            raise ValueError(f"duplicate taint {t.key}:{t.effect} across taints/startupTaints")
        seen.add((t.key, t.effect))


class Ref(Model):
    """A nodeClassRef (optional in the simulator)."""

    group: str = ""
    kind: str = ""
    name: str = ""


class ObjectMeta(Model):
    """The metadata the converters read."""

    name: str = Field(min_length=1)
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: str | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: str | None = Field(default=None, alias="deletionTimestamp")


def pydantic_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a field path: ``spec.template.requirements[0].key``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith(("function-", "literal[")):
            out += f".{part}" if out else part
    return out
