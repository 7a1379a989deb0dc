"""The NodeOverlay manifest (``karpenter.sh/v1alpha1``): price and capacity adjustments.

``price`` (an absolute override) and ``priceAdjustment`` (``+0.5``, ``-10%``) exclude each
other; ``capacity`` may only add extended resources. Applying overlays is the core's job
(``karpenter.core.provisioning.overlays``), behind the ``NodeOverlay`` feature gate.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from karpenter.api import crdfields as f
from karpenter.api import kube
from karpenter.core.model.cluster import NodeOverlay

_PRICE = re.compile(r"^\d+(\.\d+)?$")
_PRICE_ADJUSTMENT = re.compile(
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
)
_CORE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})

Quantity = str | int | float


class _Requirement(f.ClaimRequirement):
    @model_validator(mode="after")
    def _not_in(self) -> _Requirement:
        if self.operator == "NotIn" and not self.values:
            raise ValueError("values: operator NotIn needs at least one value")
        return self


class _Spec(f.Model):
    requirements: list[_Requirement] = Field(default_factory=list, max_length=100)
    price: str | None = None
    price_adjustment: str | None = Field(default=None, alias="priceAdjustment")
    capacity: dict[str, Quantity] = Field(default_factory=dict)
    weight: int | None = Field(default=None, ge=1, le=10000)

    @field_validator("price")
    @classmethod
    def _price(cls, value: str | None) -> str | None:
        if value is not None and not _PRICE.match(value):
            raise ValueError(f"price {value!r} must be a non-negative decimal")
        return value

    @field_validator("price_adjustment")
    @classmethod
    def _adjustment(cls, value: str | None) -> str | None:
        if value is not None and not _PRICE_ADJUSTMENT.match(value):
            raise ValueError(f"priceAdjustment {value!r} is invalid (e.g. +0.5, -0.1, +10%, -15%)")
        return value

    @field_validator("capacity")
    @classmethod
    def _extended_only(cls, value: dict[str, Quantity]) -> dict[str, Quantity]:
        bad = sorted(set(value) & _CORE_RESOURCES)
        if bad:
            raise ValueError(f"may only set extended resources, not {', '.join(bad)}")
        return value

    @model_validator(mode="after")
    def _exclusive(self) -> _Spec:
        if self.price is not None and self.price_adjustment is not None:
            raise ValueError("cannot set both 'price' and 'priceAdjustment'")
        return self


class NodeOverlayDoc(f.Model):
    """A karpenter.sh/v1alpha1 NodeOverlay manifest."""

    metadata: f.ObjectMeta
    spec: _Spec = Field(default_factory=_Spec)

    def to_core(self) -> NodeOverlay:
        """The core value."""
        s = self.spec
        return NodeOverlay(
            self.metadata.name,
            f.term(s.requirements),
            s.price,
            s.price_adjustment,
            kube.resources(s.capacity, "spec.capacity"),
            s.weight or 0,
        )
