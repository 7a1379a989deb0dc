"""Nodes and NodeClaims: existing and in-flight capacity."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter.core.model.pod import SelectorTerm
from karpenter.core.model.resources import Resources
from karpenter.core.scheduling.taints import Taint


@dataclass(frozen=True, slots=True)
class Node:
    """A Kubernetes Node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Resources = field(default_factory=dict)
    allocatable: Resources = field(default_factory=dict)
    provider_id: str = ""
    ready: bool = True
    unschedulable: bool = False
    creation: float = 0.0
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    """Reference to a cloud-specific NodeClass."""

    group: str = ""
    kind: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class NodeClaim:
    """A NodeClaim: a request for one node, launched or not yet."""

    name: str
    nodepool: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requirements: SelectorTerm = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    requests: Resources = field(default_factory=dict)
    node_class_ref: NodeClassRef = field(default_factory=NodeClassRef)
    expire_after: float | None = None
    termination_grace_seconds: float | None = None
    provider_id: str = ""
    node_name: str = ""
    image_id: str = ""
    capacity: Resources = field(default_factory=dict)
    allocatable: Resources = field(default_factory=dict)
    launched: bool = False
    registered: bool = False
    initialized: bool = False
    creation: float = 0.0
    deleting: bool = False
    instance_terminating: bool = False
    # When a non-DaemonSet pod last bound to, or left, the node (consolidateAfter counts from it).
    last_pod_event: float | None = None
    # When the ``Initialized`` condition turned True (consolidateAfter counts from it when no
    # pod event was seen yet); None when not initialized or the time is unknown.
    initialized_at: float | None = None
    # The reason of a True ``Drifted`` condition (the cloud provider's drift, written by the
    # drift controller); "" when not drifted.
    drifted: str = ""
