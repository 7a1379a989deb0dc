"""NodePools: templates for NodeClaims, with limits, weight and disruption settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter.core.model.node import NodeClassRef
from karpenter.core.model.pod import SelectorTerm
from karpenter.core.model.resources import Resources
from karpenter.core.scheduling.taints import Taint

WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
BALANCED = "Balanced"

REASON_EMPTY = "Empty"
REASON_DRIFTED = "Drifted"
REASON_UNDERUTILIZED = "Underutilized"
REASON_EXPIRED = "Expired"
BUDGET_REASONS = (REASON_EMPTY, REASON_DRIFTED, REASON_UNDERUTILIZED)

DEFAULT_EXPIRE_AFTER = 720 * 3600.0


@dataclass(frozen=True, slots=True)
class Budget:
    """A disruption budget: ``nodes`` is a count (``"5"``) or a percentage (``"10%"``)."""

    nodes: str = "10%"
    schedule: str | None = None
    duration_seconds: float | None = None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Disruption:
    """A NodePool's disruption block (``consolidate_after`` None means ``Never``)."""

    consolidation_policy: str = WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: float | None = 0.0
    budgets: tuple[Budget, ...] = (Budget(),)


@dataclass(frozen=True, slots=True)
class NodeClaimTemplate:
    """``spec.template`` of a NodePool."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requirements: SelectorTerm = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class_ref: NodeClassRef = field(default_factory=NodeClassRef)
    expire_after: float | None = DEFAULT_EXPIRE_AFTER
    termination_grace_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class NodePool:
    """A NodePool (``limits`` None: unlimited; ``weight`` 0 when unset)."""

    name: str
    template: NodeClaimTemplate = field(default_factory=NodeClaimTemplate)
    disruption: Disruption = field(default_factory=Disruption)
    limits: Resources | None = None
    weight: int = 0
    replicas: int | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    ready: bool = True
    deleting: bool = False
