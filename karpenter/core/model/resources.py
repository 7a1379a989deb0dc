"""Resource lists: immutable mappings from resource name to milli-units, with exact arithmetic.

Kubernetes' ``ResourceList`` semantics: a missing resource is zero; ``fits`` compares every
requested resource against what is available (a request for a resource the node does not have
does not fit, unless it is zero). Values are ``Mapping[str, int]`` so the core can use plain dicts
built once and never mutated after construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from karpenter.core.model.quantity import format_decimal, parse_quantity

Resources = Mapping[str, int]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
NODES = "nodes"
WELL_KNOWN_RESOURCES = frozenset({CPU, MEMORY, PODS, EPHEMERAL_STORAGE})
EMPTY: Resources = {}


def parse(raw: Mapping[str, str | int | float] | None) -> dict[str, int]:
    """Parse a Kubernetes resource list (``{"cpu": "2", "memory": "1Gi"}``) into milli-units."""
    return {name: parse_quantity(value) for name, value in (raw or {}).items()}


def add(*lists: Resources) -> dict[str, int]:
    """Sum resource lists."""
    total: dict[str, int] = {}
    for resources in lists:
        for name, value in resources.items():
            total[name] = total.get(name, 0) + value
    return total


def subtract(left: Resources, right: Resources) -> dict[str, int]:
    """``left - right`` over the union of names (results may be negative)."""
    result = dict(left)
    for name, value in right.items():
        result[name] = result.get(name, 0) - value
    return result


def floor_zero(resources: Resources) -> dict[str, int]:
    """Clamp every negative value to zero."""
    return {name: max(value, 0) for name, value in resources.items()}


def maximum(lists: Iterable[Resources]) -> dict[str, int]:
    """Per-resource maximum over several lists."""
    result: dict[str, int] = {}
    for resources in lists:
        for name, value in resources.items():
            if value > result.get(name, value - 1):
                result[name] = value
    return result


def fits(request: Resources, available: Resources) -> bool:
    """True when every requested amount is within what is available."""
    return all(value <= available.get(name, 0) for name, value in request.items() if value > 0)


def exceeded(request: Resources, available: Resources) -> list[str]:
    """Names of the resources whose request is above what is available, sorted."""
    return sorted(n for n, v in request.items() if v > 0 and v > available.get(n, 0))


def merge_pod_requests(
    containers: Iterable[Resources], init_containers: Iterable[Resources], overhead: Resources
) -> dict[str, int]:
    """Effective pod request: max(Σ containers, max init container) + pod overhead.

    Sidecar (restartable) init containers are folded in by the caller, who passes them among
    ``containers``; this keeps the rule of the kubelet's admission in one place.
    """
    total = add(*containers)
    for init in init_containers:
        for name, value in init.items():
            if value > total.get(name, 0):
                total[name] = value
    return add(total, overhead)


def describe(resources: Resources, names: Iterable[str] | None = None) -> str:
    """Render ``cpu=95.69, memory=12Gi`` for reasons; names sorted unless given."""
    keys = list(names) if names is not None else sorted(resources)
    return ", ".join(f"{name}={format_decimal(resources.get(name, 0), name)}" for name in keys)


def minimum(lists: Iterable[Resources]) -> dict[str, int]:
    """Per-resource minimum over several lists (a name missing from one list counts as 0)."""
    materialized = list(lists)
    if not materialized:
        return {}
    names = set().union(*materialized)
    return {n: min(r.get(n, 0) for r in materialized) for n in sorted(names)}
