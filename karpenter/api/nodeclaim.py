"""The NodeClaim manifest (``karpenter.sh/v1``) with its status, and ``to_core``.

A NodeClaim counts as launched when its ``Launched`` condition is true or it already has a
``status.providerID``; ``Registered`` and ``Initialized`` are read from their conditions.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from karpenter.api import crdfields as f
from karpenter.api import kube
from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim, NodeClassRef

Quantity = str | int | float


class _Condition(f.Model):
    type: str
    status: str
    reason: str = ""
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")


class _Status(f.Model):
    provider_id: str = Field(default="", alias="providerID")
    node_name: str = Field(default="", alias="nodeName")
    image_id: str = Field(default="", alias="imageID")
    capacity: dict[str, Quantity] = Field(default_factory=dict)
    allocatable: dict[str, Quantity] = Field(default_factory=dict)
    conditions: list[_Condition] = Field(default_factory=list)
    last_pod_event_time: str | None = Field(default=None, alias="lastPodEventTime")

    def condition(self, kind: str) -> bool:
        return any(c.type == kind and c.status == "True" for c in self.conditions)

    def true_since(self, kind: str) -> str | None:
        """When a True condition of this kind last turned True (None: absent, not True)."""
        return next(
            (
                c.last_transition_time
                for c in self.conditions
                if c.type == kind and c.status == "True"
            ),
            None,
        )

    def true_reason(self, kind: str) -> str:
        """The reason of a True condition of this kind ("" when absent or not True)."""
        return next(
            (c.reason or kind for c in self.conditions if c.type == kind and c.status == "True"),
            "",
        )


class _Resources(f.Model):
    requests: dict[str, Quantity] = Field(default_factory=dict)


class _Spec(f.Model):
    requirements: list[f.ClaimRequirement] = Field(default_factory=list, max_length=100)
    taints: list[f.TaintField] = Field(default_factory=list)
    startup_taints: list[f.TaintField] = Field(default_factory=list, alias="startupTaints")
    resources: _Resources = Field(default_factory=_Resources)
    node_class_ref: f.Ref = Field(default_factory=f.Ref, alias="nodeClassRef")
    expire_after: str = Field(default="720h", alias="expireAfter")
    termination_grace_period: str | None = Field(default=None, alias="terminationGracePeriod")

    @model_validator(mode="after")
    def _valid(self) -> _Spec:
        f.check_duration(self.expire_after, never=True)
        f.check_duration(self.termination_grace_period, never=False)
        return self


class NodeClaimDoc(f.Model):
    """A karpenter.sh/v1 NodeClaim manifest."""

    metadata: f.ObjectMeta
    spec: _Spec = Field(default_factory=_Spec)
    status: _Status = Field(default_factory=_Status)

    def to_core(self) -> NodeClaim:
        """The core value (raises DecodeError on a bad quantity or timestamp)."""
        spec, status, meta = self.spec, self.status, self.metadata
        ref = spec.node_class_ref
        return NodeClaim(
            meta.name,
            meta.labels.get(lbl.NODEPOOL, ""),
            dict(meta.labels),
            dict(meta.annotations),
            f.term(spec.requirements),
            tuple(x.to_core() for x in spec.taints),
            tuple(x.to_core() for x in spec.startup_taints),
            kube.resources(spec.resources.requests, "spec.resources.requests"),
            NodeClassRef(ref.group, ref.kind, ref.name),
            f.nillable_seconds(spec.expire_after),
            f.nillable_seconds(spec.termination_grace_period),
            status.provider_id,
            status.node_name,
            status.image_id,
            kube.resources(status.capacity, "status.capacity"),
            kube.resources(status.allocatable, "status.allocatable"),
            status.condition("Launched") or bool(status.provider_id),
            status.condition("Registered"),
            status.condition("Initialized"),
            kube.timestamp(meta.creation_timestamp, "metadata.creationTimestamp") or 0.0,
            meta.deletion_timestamp is not None,
            last_pod_event=kube.timestamp(status.last_pod_event_time, "status.lastPodEventTime"),
            drifted=status.true_reason("Drifted"),
            initialized_at=kube.timestamp(
                status.true_since("Initialized"), "status.conditions.lastTransitionTime"
            ),
        )
