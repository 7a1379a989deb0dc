"""The cluster snapshot the core decides on: every object the solver and disruption read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod, SelectorTerm
from karpenter.core.model.resources import Resources
from karpenter.core.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from karpenter.core.scheduling.selectors import LabelSelector


@dataclass(frozen=True, slots=True)
class DaemonSet:
    """A DaemonSet: its pod template is overhead on every node it would run on."""

    namespace: str
    name: str
    template: Pod


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """A PDB, reduced to its selector and how many evictions it allows now."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    always_allow_unhealthy: bool = False


@dataclass(frozen=True, slots=True)
class NodeOverlay:
    """A NodeOverlay (v1alpha1): price or capacity adjustments for matching instance types."""

    name: str
    requirements: SelectorTerm = ()
    price: str | None = None
    price_adjustment: str | None = None
    capacity: Resources = field(default_factory=dict)
    weight: int = 0


@dataclass(frozen=True, slots=True)
class Options:
    """Settings the decisions depend on (built from the controller's Settings by the shell)."""

    preference_policy: str = "Respect"
    min_values_policy: str = "Strict"
    spot_to_spot_consolidation: bool = False
    node_overlay: bool = False
    max_instance_types: int = 600
    extra_well_known_labels: frozenset[str] = frozenset()
    # The provider's label for a reserved offering's reservation id (AWS:
    # karpenter.k8s.aws/capacity-reservation-id); the core only carries it through.
    reservation_id_label: str = ""
    # Labels that describe a reservation (id included): an unreserved node never carries them.
    reservation_labels: frozenset[str] = frozenset()
    # COST_POLICY: "optimal" repacks a pass's new NodeClaims into the cheapest mix of types,
    # "firstfit" keeps upstream's first-fit claims as they are.
    cost_policy: str = "optimal"
    # The cost pass's work budget per provisioning pass, in solver steps (simplex iterations,
    # branch-and-bound and pricing-search nodes): past it the pass keeps what it has found.
    cost_work: int = 200_000
    # How many replacements one consolidation command may launch (1: upstream's rule).
    max_replacements: int = 10
    # FEATURE_GATES=ConsolidationRepack (not upstream): consolidation's repack method
    # (core.disruption.repack), held by the controller's ratchet (core.disruption.ratchet).
    repack_consolidation: bool = True
    # FEATURE_GATES=MixingHedge (not upstream): provisioning launches types that hold the mix
    # of the pass's pods the kube-scheduler will bind there (core.provisioning.mixing).
    mixing_hedge: bool = True
    # FEATURE_GATES=StrandingCheck (not upstream): consolidation refuses a command whose
    # evicted pods the kube-scheduler would leave without a node (core.provisioning.binding).
    stranding_check: bool = True


@dataclass(frozen=True, slots=True)
class Cluster:
    """An immutable snapshot of the cluster plus the cloud's instance types per NodePool."""

    nodepools: tuple[NodePool, ...] = ()
    instance_types: Mapping[str, tuple[InstanceType, ...]] = field(default_factory=dict)
    nodes: tuple[Node, ...] = ()
    nodeclaims: tuple[NodeClaim, ...] = ()
    pods: tuple[Pod, ...] = ()
    daemonsets: tuple[DaemonSet, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    pvcs: tuple[PersistentVolumeClaim, ...] = ()
    pvs: tuple[PersistentVolume, ...] = ()
    storage_classes: tuple[StorageClass, ...] = ()
    csinodes: tuple[CSINode, ...] = ()
    overlays: tuple[NodeOverlay, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # CapacityBuffers' virtual pods (core.buffers): headroom every provisioning pass adds to
    # the pending pods and every disruption what-if must keep room for. Never in ``pods``.
    virtual_pods: tuple[Pod, ...] = ()
