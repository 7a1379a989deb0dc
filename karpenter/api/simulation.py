"""The simulator's own documents: ``InstanceType`` and ``InstanceTypeCatalog`` (v1alpha1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter.api import kube
from karpenter.api.errors import DecodeError
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.scheduling.requirements import RequirementError, from_selector_terms

PRESETS = ("fake", "aws")


@dataclass(frozen=True, slots=True)
class CatalogSpec:
    """An InstanceTypeCatalog document."""

    preset: str
    count: int = 400
    region: str = ""
    price_file: str = ""


def _offering(value: Any, path: str) -> Offering:
    if not isinstance(value, Mapping):
        raise DecodeError(path, "expected an object")
    for field in ("zone", "capacityType"):
        if not isinstance(value.get(field), str) or not value[field]:
            raise DecodeError(f"{path}.{field}", "required")
    price = value.get("price")
    if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
        raise DecodeError(f"{path}.price", f"must be a non-negative number, got {price!r}")
    available = value.get("available", True)
    if not isinstance(available, bool):
        raise DecodeError(f"{path}.available", "must be true or false")
    rid, count = _reservation(value, path)
    return Offering(value["zone"], value["capacityType"], float(price), available, count, rid)


def _reservation(value: Mapping[str, Any], path: str) -> tuple[str, int]:
    """A reserved offering's ``reservationID`` and ``reservationCapacity`` (instances left)."""
    rid = value.get("reservationID", "")
    count = value.get("reservationCapacity", 0)
    reserved = value["capacityType"] == "reserved"
    if not isinstance(rid, str) or (reserved and not rid):
        raise DecodeError(f"{path}.reservationID", "a reserved offering names its reservation")
    if rid and not reserved:
        raise DecodeError(f"{path}.reservationID", "only reserved offerings have one")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise DecodeError(f"{path}.reservationCapacity", "must be a non-negative integer")
    return rid, count


def instance_type(obj: Mapping[str, Any]) -> InstanceType:
    """Decode an InstanceType document."""
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise DecodeError("metadata.name", "required")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise DecodeError("spec", "required")
    capacity = kube.resources(spec.get("capacity"), "spec.capacity")
    if not capacity:
        raise DecodeError("spec.capacity", "required")
    reqs = spec.get("requirements") or []
    if not isinstance(reqs, list):
        raise DecodeError("spec.requirements", "expected a list")
    terms = tuple(
        kube.selector_requirement(r, f"spec.requirements[{i}]") for i, r in enumerate(reqs)
    )
    try:
        requirements = from_selector_terms(terms)
    except RequirementError as err:
        raise DecodeError("spec.requirements", str(err)) from None
    offerings = spec.get("offerings")
    if not isinstance(offerings, list) or not offerings:
        raise DecodeError("spec.offerings", "at least one offering is required")
    return InstanceType(
        name,
        requirements,
        tuple(_offering(o, f"spec.offerings[{i}]") for i, o in enumerate(offerings)),
        capacity,
        kube.resources(spec.get("overhead"), "spec.overhead"),
    )


def catalog(obj: Mapping[str, Any]) -> CatalogSpec:
    """Decode an InstanceTypeCatalog document."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise DecodeError("spec", "required")
    preset = spec.get("preset")
    if preset not in PRESETS:
        raise DecodeError("spec.preset", f"unknown preset {preset!r} (one of {', '.join(PRESETS)})")
    count = spec.get("count", 400)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10000:
        raise DecodeError("spec.count", f"must be an integer from 1 to 10000, got {count!r}")
    return CatalogSpec(
        str(preset), count, str(spec.get("region") or ""), str(spec.get("priceFile") or "")
    )
