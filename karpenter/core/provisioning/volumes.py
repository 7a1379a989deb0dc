"""Volume topology and volume limits: where a pod's persistent volumes let it run.

A bound PVC pins the pod to its PV's node affinity (each required term is an alternative; for
local and hostPath volumes the hostname expressions are dropped, since a new node cannot be that
host). An unbound PVC of a ``WaitForFirstConsumer`` class follows the class's allowed topologies.
Alternatives of several volumes combine into the compatible cross-product.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster
from karpenter.core.model.pod import Pod, SelectorTerm
from karpenter.core.model.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms

NO_CONSTRAINT: tuple[Requirements, ...] = (Requirements(),)


class VolumeError(ValueError):
    """A pod's volumes cannot be resolved (missing PVC, StorageClass, ...)."""


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """Resolved volume facts of a pod: topology alternatives and volumes per CSI driver."""

    alternatives: tuple[Requirements, ...]
    by_driver: Mapping[str, frozenset[str]]


class VolumeIndex:
    """Lookup tables over the snapshot's PVCs, PVs and StorageClasses."""

    def __init__(self, cluster: Cluster) -> None:
        self.pvcs: dict[tuple[str, str], PersistentVolumeClaim] = {
            (c.namespace, c.name): c for c in cluster.pvcs
        }
        self.pvs: dict[str, PersistentVolume] = {v.name: v for v in cluster.pvs}
        self.classes: dict[str, StorageClass] = {s.name: s for s in cluster.storage_classes}
        self._cache: dict[tuple[str, tuple[str, ...]], PodVolumes] = {}

    def resolve(self, pod: Pod) -> PodVolumes:
        """Topology alternatives and driver usage of a pod (raises VolumeError)."""
        key = (pod.namespace, pod.pvc_names)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._resolve(pod)
            self._cache[key] = cached
        return cached

    def _resolve(self, pod: Pod) -> PodVolumes:
        alternatives = NO_CONSTRAINT
        by_driver: dict[str, set[str]] = {}
        for name in pod.pvc_names:
            pvc = self.pvcs.get((pod.namespace, name))
            if pvc is None:
                raise VolumeError(f'persistentvolumeclaim "{name}" not found')
            if pvc.deleting:
                raise VolumeError(f'persistentvolumeclaim "{name}" is being deleted')
            terms, driver = self._volume_terms(pvc)
            if driver:
                by_driver.setdefault(driver, set()).add(f"{pod.namespace}/{name}")
            if terms:
                alternatives = _combine(alternatives, terms)
        return PodVolumes(alternatives, {d: frozenset(v) for d, v in by_driver.items()})

    def _volume_terms(self, pvc: PersistentVolumeClaim) -> tuple[list[Requirements], str]:
        if pvc.volume_name:
            pv = self.pvs.get(pvc.volume_name)
            if pv is None:
                raise VolumeError(f'persistentvolume "{pvc.volume_name}" not found')
            terms = [_term(t, drop_hostname=pv.local) for t in pv.node_terms]
            return [t for t in terms if t is not None], pv.csi_driver
        if not pvc.storage_class:
            raise VolumeError(f'persistentvolumeclaim "{pvc.name}" is unbound and has no class')
        sc = self.classes.get(pvc.storage_class)
        if sc is None:
            raise VolumeError(f'storageclass "{pvc.storage_class}" not found')
        if sc.volume_binding_mode != "WaitForFirstConsumer":
            raise VolumeError(
                f'persistentvolumeclaim "{pvc.name}" is unbound with Immediate binding mode'
            )
        terms = [_term(t, drop_hostname=False) for t in sc.allowed_topologies]
        return [t for t in terms if t is not None], sc.provisioner


def _term(term: SelectorTerm, *, drop_hostname: bool) -> Requirements | None:
    kept = tuple(e for e in term if not (drop_hostname and e[0] == lbl.HOSTNAME))
    return from_selector_terms(kept) if kept else None


def _combine(
    current: Iterable[Requirements], terms: list[Requirements]
) -> tuple[Requirements, ...]:
    combined = []
    everything = []
    for base in current:
        for term in terms:
            merged = base.intersect(term)
            everything.append(merged)
            if not base.conflicts(term):
                combined.append(merged)
    return tuple(combined or everything)
