"""Pods as the scheduler sees them: requests, placement constraints, ownership and lifecycle."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter.core.model.resources import Resources
from karpenter.core.scheduling.selectors import LabelSelector
from karpenter.core.scheduling.taints import Toleration

# (key, operator, values, minValues): a NodeSelectorRequirement before it is interpreted.
SelectorTerm = tuple[tuple[str, str, tuple[str, ...], int | None], ...]

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A (required or preferred) pod affinity / anti-affinity term."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    """A preferred pod (anti-)affinity term with its weight."""

    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class WeightedNodeTerm:
    """A preferred node-affinity term with its weight."""

    weight: int
    term: SelectorTerm


@dataclass(frozen=True, slots=True)
class TopologySpread:
    """A topology spread constraint."""

    topology_key: str
    max_skew: int
    when_unsatisfiable: str = DO_NOT_SCHEDULE
    selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container host port (IP ``""`` means every address)."""

    port: int
    protocol: str = "TCP"
    ip: str = ""


@dataclass(frozen=True, slots=True)
class Owner:
    """An owner reference, reduced to what scheduling and disruption use."""

    kind: str
    name: str
    api_version: str = ""
    controller: bool = False


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod. Times are seconds since the epoch; ``node_name`` empty means pending."""

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requests: Resources = field(default_factory=dict)
    node_name: str = ""
    phase: str = "Pending"
    creation: float = 0.0
    start_time: float | None = None
    deleting: bool = False
    # metadata.deletionTimestamp: when the pod's grace period ends (set by the delete call)
    deletion_time: float | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_terms: tuple[SelectorTerm, ...] = ()
    preferred_node_terms: tuple[WeightedNodeTerm, ...] = ()
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpread, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    pvc_names: tuple[str, ...] = ()
    ephemeral_volume_count: int = 0
    owners: tuple[Owner, ...] = ()
    priority: int = 0
    priority_class_name: str = ""
    termination_grace_seconds: int | None = None
    unschedulable_condition: bool = False
    # Not judged by the kube-scheduler yet: no PodScheduled condition, no scheduling gates, and
    # the default scheduler (whose filters the core models) is the one that will judge it.
    awaiting_scheduler: bool = False
    nominated_node_name: str = ""
    ready: bool = False

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def is_daemonset_pod(self) -> bool:
        """Owned by a DaemonSet (such pods are overhead, never provisioned for)."""
        return any(o.kind == "DaemonSet" for o in self.owners)

    def is_mirror_pod(self) -> bool:
        """A static pod mirrored by the kubelet (owned by its Node)."""
        return any(o.kind == "Node" for o in self.owners) or (
            "kubernetes.io/config.mirror" in self.annotations
        )

    def is_terminal(self) -> bool:
        """Succeeded or Failed."""
        return self.phase in ("Succeeded", "Failed")

    def is_active(self) -> bool:
        """Neither terminal nor being deleted."""
        return not self.is_terminal() and not self.deleting
