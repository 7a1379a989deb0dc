"""Karpenter's CRDs at the boundary: NodePool and NodeClaim (v1), NodeOverlay (v1alpha1).

pydantic models carry the CRD's OpenAPI/CEL validation (the same rules the apiserver enforces
from ``config/crd``), so bad manifests are refused with the field named before the core sees
them; ``to_core`` converts into the core's frozen values.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from karpenter.api import kube
from karpenter.api.errors import DecodeError
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import NodeOverlay
from karpenter.core.model.node import NodeClaim, NodeClassRef
from karpenter.core.model.nodepool import (
    Budget,
    Disruption,
    NodeClaimTemplate,
    NodePool,
)
from karpenter.core.model.pod import SelectorTerm

_DURATION = re.compile(r"^([0-9]+(s|m|h))+$")
_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_BUDGET_DURATION = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
_PRICE = re.compile(r"^\d+(\.\d+)?$")
_PRICE_ADJ = re.compile(r"^(([+-](\d*\.?\d+))|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%))$")
_UNITS = {"s": 1, "m": 60, "h": 3600}


def duration_seconds(text: str) -> float:
    """A Kubernetes duration like ``720h`` or ``1h30m`` in seconds."""
    return float(sum(int(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)(s|m|h)", text)))


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class _Requirement(_Model):
    key: str
    operator: str
    values: list[str] = Field(default_factory=list)
    min_values: int | None = Field(default=None, alias="minValues", ge=1, le=50)

    @model_validator(mode="after")
    def _valid(self) -> _Requirement:
        kube.selector_requirement(self.model_dump(by_alias=True), "")
        if self.operator == "In" and self.min_values and len(self.values) < self.min_values:
            raise ValueError(f"minValues {self.min_values} exceeds the {len(self.values)} values")
        return self


def _term(reqs: list[_Requirement]) -> SelectorTerm:
    return tuple((r.key, r.operator, tuple(r.values), r.min_values) for r in reqs)


def _restricted(key: str, *, nodepool: bool) -> str | None:
    if key == lbl.HOSTNAME:
        return f"label {key} is restricted"
    if key == lbl.NODEPOOL:
        return f"label {key} is restricted" if nodepool else None
    if key == lbl.CAPACITY_TYPE:
        return None
    domain = lbl.label_domain(key)
    if domain == "karpenter.sh" or domain.endswith(".karpenter.sh"):
        return f"label domain {domain} is restricted"
    return None


class _Taint(_Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class _Ref(_Model):
    group: str = ""
    kind: str = ""
    name: str = ""


class _Metadata(_Model):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class _TemplateSpec(_Model):
    requirements: list[_Requirement] = Field(default_factory=list, max_length=100)
    taints: list[_Taint] = Field(default_factory=list)
    startup_taints: list[_Taint] = Field(default_factory=list, alias="startupTaints")
    node_class_ref: _Ref = Field(default_factory=_Ref, alias="nodeClassRef")
    expire_after: str = Field(default="720h", alias="expireAfter")
    termination_grace_period: str | None = Field(default=None, alias="terminationGracePeriod")

    @field_validator("expire_after")
    @classmethod
    def _expire(cls, value: str) -> str:
        if value != "Never" and not _DURATION.match(value):
            raise ValueError(f"invalid duration {value!r} (e.g. 720h, or Never)")
        return value

    @field_validator("termination_grace_period")
    @classmethod
    def _tgp(cls, value: str | None) -> str | None:
        if value is not None and not _DURATION.match(value):
            raise ValueError(f"invalid duration {value!r} (e.g. 48h)")
        return value

    @model_validator(mode="after")
    def _taints_unique(self) -> _TemplateSpec:
        seen = set()
        for t in [*self.taints, *self.startup_taints]:
            if (t.key, t.effect) in seen:
                raise ValueError(f"duplicate taint {t.key}:{t.effect} across taints/startupTaints")
            seen.add((t.key, t.effect))
        for r in self.requirements:
            why = _restricted(r.key, nodepool=True)
            if why:
                raise ValueError(f"requirement {r.key}: {why}")
        return self


class _Template(_Model):
    metadata: _Metadata = Field(default_factory=_Metadata)
    spec: _TemplateSpec = Field(default_factory=_TemplateSpec)

    @model_validator(mode="after")
    def _labels(self) -> _Template:
        for key in self.metadata.labels:
            why = _restricted(key, nodepool=True)
            if why:
                raise ValueError(f"metadata.labels.{key}: {why}")
        return self


class _Budget(_Model):
    nodes: str = "10%"
    schedule: str | None = None
    duration: str | None = None
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _valid(self) -> _Budget:
        if not _BUDGET_NODES.match(self.nodes):
            raise ValueError(f"nodes {self.nodes!r} must be a count or a percentage")
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("'schedule' must be set with 'duration'")
        if self.duration is not None and not _BUDGET_DURATION.match(self.duration):
            raise ValueError(f"invalid duration {self.duration!r} (hours and minutes only)")
        return self


class _Disruption(_Model):
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] = Field(
        default="WhenEmptyOrUnderutilized", alias="consolidationPolicy"
    )
    consolidate_after: str = Field(default="0s", alias="consolidateAfter")
    budgets: list[_Budget] = Field(default_factory=lambda: [_Budget()], max_length=50)

    @field_validator("consolidate_after")
    @classmethod
    def _after(cls, value: str) -> str:
        if value != "Never" and not _DURATION.match(value):
            raise ValueError(f"invalid duration {value!r} (e.g. 30s, or Never)")
        return value


class _NodePoolSpec(_Model):
    template: _Template = Field(default_factory=_Template)
    disruption: _Disruption = Field(default_factory=_Disruption)
    limits: dict[str, str | int | float] | None = None
    weight: int | None = Field(default=None, ge=1, le=100)
    replicas: int | None = Field(default=None, ge=0)


class _ObjectMeta(_Model):
    name: str
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)


class NodePoolDoc(_Model):
    """A karpenter.sh/v1 NodePool manifest."""

    metadata: _ObjectMeta
    spec: _NodePoolSpec = Field(default_factory=_NodePoolSpec)

    def to_core(self) -> NodePool:
        """The core value (durations in seconds; ``Never`` becomes None)."""
        spec = self.spec
        t = spec.template.spec
        d = spec.disruption
        budgets = tuple(
            Budget(
                b.nodes,
                b.schedule,
                duration_seconds(b.duration) if b.duration else None,
                tuple(b.reasons),
            )
            for b in d.budgets
        )
        limits = kube.resources(spec.limits, "spec.limits") if spec.limits is not None else None
        return NodePool(
            self.metadata.name,
            NodeClaimTemplate(
                dict(spec.template.metadata.labels),
                dict(spec.template.metadata.annotations),
                _term(t.requirements),
                tuple(kube.taint(x.model_dump(), "") for x in t.taints),
                tuple(kube.taint(x.model_dump(), "") for x in t.startup_taints),
                NodeClassRef(t.node_class_ref.group, t.node_class_ref.kind, t.node_class_ref.name),
                None if t.expire_after == "Never" else duration_seconds(t.expire_after),
                duration_seconds(t.termination_grace_period)
                if t.termination_grace_period
                else None,
            ),
            Disruption(
                d.consolidation_policy,
                None if d.consolidate_after == "Never" else duration_seconds(d.consolidate_after),
                budgets,
            ),
            limits,
            spec.weight or 0,
            spec.replicas,
            dict(self.metadata.annotations),
        )


class _Condition(_Model):
    type: str
    status: str


class _NodeClaimStatus(_Model):
    provider_id: str = Field(default="", alias="providerID")
    node_name: str = Field(default="", alias="nodeName")
    image_id: str = Field(default="", alias="imageID")
    capacity: dict[str, str | int | float] = Field(default_factory=dict)
    allocatable: dict[str, str | int | float] = Field(default_factory=dict)
    conditions: list[_Condition] = Field(default_factory=list)

    def condition(self, kind: str) -> bool:
        return any(c.type == kind and c.status == "True" for c in self.conditions)


class _NodeClaimSpec(_Model):
    requirements: list[_Requirement] = Field(default_factory=list)
    taints: list[_Taint] = Field(default_factory=list)
    startup_taints: list[_Taint] = Field(default_factory=list, alias="startupTaints")
    resources: dict[str, Any] = Field(default_factory=dict)
    node_class_ref: _Ref = Field(default_factory=_Ref, alias="nodeClassRef")
    expire_after: str = Field(default="720h", alias="expireAfter")
    termination_grace_period: str | None = Field(default=None, alias="terminationGracePeriod")


class _NodeClaimMeta(_ObjectMeta):
    creation_timestamp: str | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: str | None = Field(default=None, alias="deletionTimestamp")


class NodeClaimDoc(_Model):
    """A karpenter.sh/v1 NodeClaim manifest."""

    metadata: _NodeClaimMeta
    spec: _NodeClaimSpec = Field(default_factory=_NodeClaimSpec)
    status: _NodeClaimStatus = Field(default_factory=_NodeClaimStatus)

    def to_core(self) -> NodeClaim:
        """The core value."""
        spec, status, meta = self.spec, self.status, self.metadata
        requests = kube.resources(spec.resources.get("requests"), "spec.resources.requests")
        launched = status.condition("Launched") or bool(status.provider_id)
        return NodeClaim(
            meta.name,
            meta.labels.get(lbl.NODEPOOL, ""),
            dict(meta.labels),
            dict(meta.annotations),
            _term(spec.requirements),
            tuple(kube.taint(x.model_dump(), "") for x in spec.taints),
            tuple(kube.taint(x.model_dump(), "") for x in spec.startup_taints),
            requests,
            NodeClassRef(
                spec.node_class_ref.group, spec.node_class_ref.kind, spec.node_class_ref.name
            ),
            None if spec.expire_after == "Never" else duration_seconds(spec.expire_after),
            duration_seconds(spec.termination_grace_period)
            if spec.termination_grace_period
            else None,
            status.provider_id,
            status.node_name,
            status.image_id,
            kube.resources(status.capacity, "status.capacity"),
            kube.resources(status.allocatable, "status.allocatable"),
            launched,
            status.condition("Registered"),
            status.condition("Initialized"),
            kube.timestamp(meta.creation_timestamp, "metadata.creationTimestamp") or 0.0,
            meta.deletion_timestamp is not None,
        )


class _OverlaySpec(_Model):
    requirements: list[_Requirement] = Field(default_factory=list, max_length=100)
    price: str | None = None
    price_adjustment: str | None = Field(default=None, alias="priceAdjustment")
    capacity: dict[str, str | int | float] = Field(default_factory=dict)
    weight: int | None = Field(default=None, ge=1, le=10000)

    @model_validator(mode="after")
    def _valid(self) -> _OverlaySpec:
        if self.price is not None and self.price_adjustment is not None:
            raise ValueError("cannot set both 'price' and 'priceAdjustment'")
        if self.price is not None and not _PRICE.match(self.price):
            raise ValueError(f"price {self.price!r} must be a non-negative decimal")
        if self.price_adjustment is not None and not _PRICE_ADJ.match(self.price_adjustment):
            raise ValueError(
                f"priceAdjustment {self.price_adjustment!r} is invalid (e.g. +0.5, -10%)"
            )
        bad = sorted(set(self.capacity) & {"cpu", "memory", "ephemeral-storage", "pods"})
        if bad:
            raise ValueError(f"capacity may only set extended resources, not {', '.join(bad)}")
        return self


class NodeOverlayDoc(_Model):
    """A karpenter.sh/v1alpha1 NodeOverlay manifest."""

    metadata: _ObjectMeta
    spec: _OverlaySpec = Field(default_factory=_OverlaySpec)

    def to_core(self) -> NodeOverlay:
        """The core value."""
        s = self.spec
        return NodeOverlay(
            self.metadata.name,
            _term(s.requirements),
            s.price,
            s.price_adjustment,
            kube.resources(s.capacity, "spec.capacity"),
            s.weight or 0,
        )


def pydantic_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a field path: ``spec.template.requirements[0].key``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith(("function-", "literal[")):
            out += f".{part}" if out else part
    return out


__all__ = ("DecodeError", "NodeClaimDoc", "NodeOverlayDoc", "NodePoolDoc", "pydantic_path")
