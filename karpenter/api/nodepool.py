"""The NodePool manifest (``karpenter.sh/v1``): validation with the CRD's rules, and ``to_core``.

Defaults are the CRD's: ``expireAfter: 720h``, ``consolidationPolicy:
WhenEmptyOrUnderutilized``, ``consolidateAfter: 0s`` and one budget of ``nodes: 10%``.
``nodeClassRef`` may be omitted (the simulator has no NodeClass).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from karpenter.api import crdfields as f
from karpenter.api import kube
from karpenter.core.model.node import NodeClassRef
from karpenter.core.model.nodepool import Budget, Disruption, NodeClaimTemplate, NodePool

_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_BUDGET_DURATION = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
_CRON_MACROS = ("@annually", "@yearly", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")

Quantity = str | int | float


class _Metadata(f.Model):
    labels: dict[str, str] = Field(default_factory=dict, max_length=100)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        f.check_labels(value, allow_nodepool=False)
        return value


class _TemplateSpec(f.Model):
    requirements: list[f.PoolRequirement] = Field(default_factory=list, max_length=100)
    taints: list[f.TaintField] = Field(default_factory=list)
    startup_taints: list[f.TaintField] = Field(default_factory=list, alias="startupTaints")
    node_class_ref: f.Ref = Field(default_factory=f.Ref, alias="nodeClassRef")
    expire_after: str = Field(default="720h", alias="expireAfter")
    termination_grace_period: str | None = Field(default=None, alias="terminationGracePeriod")

    @field_validator("expire_after")
    @classmethod
    def _expire(cls, value: str) -> str:
        f.check_duration(value, never=True)
        return value

    @field_validator("termination_grace_period")
    @classmethod
    def _tgp(cls, value: str | None) -> str | None:
        return f.check_duration(value, never=False)

    @model_validator(mode="after")
    def _taints_unique(self) -> _TemplateSpec:
        f.unique_taints(self.taints, self.startup_taints)
        return self


class _Template(f.Model):
    metadata: _Metadata = Field(default_factory=_Metadata)
    spec: _TemplateSpec = Field(default_factory=_TemplateSpec)


class _Budget(f.Model):
    nodes: str = Field(default="10%", pattern=_BUDGET_NODES.pattern)
    schedule: str | None = None
    duration: str | None = None
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] = Field(
        default_factory=list, max_length=50
    )

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is not None and value not in _CRON_MACROS and len(value.split()) != 5:
            raise ValueError(f"invalid schedule {value!r} (five cron fields, or @daily etc.)")
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and not _BUDGET_DURATION.match(value):
            raise ValueError(f"invalid duration {value!r} (hours and minutes only)")
        return value

    @model_validator(mode="after")
    def _together(self) -> _Budget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("'schedule' must be set with 'duration'")
        return self

    def to_core(self) -> Budget:
        return Budget(
            self.nodes,
            self.schedule,
            f.duration_seconds(self.duration) if self.duration else None,
            tuple(self.reasons),
        )


class _Disruption(f.Model):
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] = Field(
        default="WhenEmptyOrUnderutilized", alias="consolidationPolicy"
    )
    consolidate_after: str = Field(default="0s", alias="consolidateAfter")
    budgets: list[_Budget] = Field(default_factory=lambda: [_Budget()], max_length=50)

    @field_validator("consolidate_after")
    @classmethod
    def _after(cls, value: str) -> str:
        f.check_duration(value, never=True)
        return value


class _Spec(f.Model):
    template: _Template = Field(default_factory=_Template)
    disruption: _Disruption = Field(default_factory=_Disruption)
    limits: dict[str, Quantity] | None = None
    weight: int | None = Field(default=None, ge=1, le=100)
    replicas: int | None = Field(default=None, ge=0)

    @field_validator("limits")
    @classmethod
    def _non_negative(cls, value: dict[str, Quantity] | None) -> dict[str, Quantity] | None:
        # the CRD's CEL rule says the same at admission; simulate reads YAML without one
        negative = sorted(k for k, v in (value or {}).items() if str(v).strip().startswith("-"))
        if negative:
            raise ValueError(f"limits must not be negative ({', '.join(negative)})")
        return value

    @model_validator(mode="after")
    def _static(self) -> _Spec:
        if self.replicas is not None:
            if self.limits and set(self.limits) != {"nodes"}:
                raise ValueError("a NodePool with replicas may only limit 'nodes'")
            if self.weight is not None:
                raise ValueError("a NodePool with replicas cannot set 'weight'")
        return self


class NodePoolDoc(f.Model):
    """A karpenter.sh/v1 NodePool manifest."""

    metadata: f.ObjectMeta
    spec: _Spec = Field(default_factory=_Spec)

    def to_core(self) -> NodePool:
        """The core value (durations in seconds; ``Never`` becomes None)."""
        spec = self.spec
        t = spec.template.spec
        d = spec.disruption
        limits = kube.resources(spec.limits, "spec.limits") if spec.limits is not None else None
        ref = t.node_class_ref
        template = NodeClaimTemplate(
            dict(spec.template.metadata.labels),
            dict(spec.template.metadata.annotations),
            f.term(t.requirements),
            tuple(x.to_core() for x in t.taints),
            tuple(x.to_core() for x in t.startup_taints),
            NodeClassRef(ref.group, ref.kind, ref.name),
            f.nillable_seconds(t.expire_after),
            f.nillable_seconds(t.termination_grace_period),
        )
        return NodePool(
            self.metadata.name,
            template,
            Disruption(
                d.consolidation_policy,
                f.nillable_seconds(d.consolidate_after),
                tuple(b.to_core() for b in d.budgets),
            ),
            limits,
            spec.weight or 0,
            spec.replicas,
            dict(self.metadata.annotations),
        )
