"""PodDisruptionBudgets (``policy/v1``): how many evictions each allows in the snapshot.

A PDB read from a cluster carries ``status.disruptionsAllowed``, which is used as it is. A PDB
written by hand usually has no status; then the number is computed the way the disruption
controller computes it, from the scenario's pods: the matching pods in the PDB's namespace are
the expected count, the bound and active ones among them are healthy (scenario files rarely
carry readiness), and ``minAvailable`` / ``maxUnavailable`` (integers or percentages, rounded
up) give the desired healthy count. ``disruptionsAllowed = max(0, healthy - desired)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from karpenter.api import kube
from karpenter.api.errors import DecodeError
from karpenter.core.model.cluster import PodDisruptionBudget
from karpenter.core.model.pod import Pod
from karpenter.core.scheduling.selectors import LabelSelector


@dataclass(frozen=True, slots=True)
class UnresolvedBudget:
    """A PDB without a status: its allowance waits for the snapshot's pods."""

    namespace: str
    name: str
    selector: LabelSelector | None
    min_available: int | str | None
    max_unavailable: int | str | None
    always_allow_unhealthy: bool

    def resolve(self, pods: Iterable[Pod]) -> PodDisruptionBudget:
        """The PDB with ``disruptionsAllowed`` computed from ``pods``."""
        matching = [
            p
            for p in pods
            if p.namespace == self.namespace
            and not p.is_terminal()
            and self.selector is not None
            and self.selector.matches(p.labels)
        ]
        expected = len(matching)
        healthy = sum(1 for p in matching if p.node_name and not p.deleting)
        if self.max_unavailable is not None:
            desired = expected - _scaled(self.max_unavailable, expected)
        elif self.min_available is not None:
            desired = _scaled(self.min_available, expected)
        else:
            desired = 0
        allowed = max(0, healthy - desired)
        return PodDisruptionBudget(
            self.namespace, self.name, self.selector, allowed, self.always_allow_unhealthy
        )


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    return math.ceil(int(value.removesuffix("%")) * total / 100)


def _int_or_percent(value: Any, path: str) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return value
    raise DecodeError(path, f"expected a non-negative integer or a percentage, got {value!r}")


def pdb(obj: kube.Obj) -> PodDisruptionBudget | UnresolvedBudget:
    """Decode a policy/v1 PDB (unresolved when it has no ``status.disruptionsAllowed``)."""
    meta = kube.map_of(obj.get("metadata"), "metadata")
    spec = kube.map_of(obj.get("spec"), "spec")
    status = kube.map_of(obj.get("status"), "status")
    namespace = str(meta.get("namespace") or "default")
    name = kube.name_of(meta)
    selector = kube.label_selector(spec.get("selector"), "spec.selector")
    always = spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
    min_available = _int_or_percent(spec.get("minAvailable"), "spec.minAvailable")
    max_unavailable = _int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        raise DecodeError("spec", "minAvailable and maxUnavailable are mutually exclusive")
    allowed = status.get("disruptionsAllowed")
    if allowed is None:
        return UnresolvedBudget(namespace, name, selector, min_available, max_unavailable, always)
    if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 0:
        raise DecodeError("status.disruptionsAllowed", "must be a non-negative integer")
    return PodDisruptionBudget(namespace, name, selector, allowed, always)
