"""Storage objects that constrain placement: PVCs, PVs, StorageClasses and CSINode limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter.core.model.pod import SelectorTerm


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """A PVC (``volume_name`` set once bound)."""

    namespace: str
    name: str
    storage_class: str = ""
    volume_name: str = ""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """A PV: its required node-affinity terms (OR-ed) and CSI driver."""

    name: str
    node_terms: tuple[SelectorTerm, ...] = ()
    csi_driver: str = ""
    storage_class: str = ""
    local: bool = False


@dataclass(frozen=True, slots=True)
class StorageClass:
    """A StorageClass: provisioner, binding mode and allowed topologies (OR-ed terms)."""

    name: str
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"
    allowed_topologies: tuple[SelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class CSINode:
    """Per-driver volume attach limits of one node."""

    name: str
    limits: Mapping[str, int] = field(default_factory=dict)
