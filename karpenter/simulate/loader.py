"""Loading a simulation scenario: YAML or JSON documents → validated API objects → a snapshot.

Every document is checked against the contract's table of kinds; any problem becomes one
``ScenarioError`` line naming the file, the document and the field, so the CLI can exit 2
without a traceback. ``documents`` turns text into raw documents (JSON, and YAML as PyYAML reads
it, fast). Loading builds millions of small objects and no garbage cycles, so the cyclic
garbage collector is paused while it runs (it would rescan the growing heap again and again).
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from karpenter.api import (
    capacitybuffer,
    crdfields,
    kube,
    nodeclaim,
    nodeoverlay,
    nodepool,
    pdb,
    simulation,
)
from karpenter.api.errors import DecodeError
from karpenter.core import buffers
from karpenter.core.catalogs.preset import CatalogError
from karpenter.core.model.cluster import Cluster, DaemonSet, NodeOverlay, PodDisruptionBudget
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from karpenter.core.provisioning import overlays
from karpenter.providers import registry
from karpenter.settings import Settings
from karpenter.simulate import documents


class ScenarioError(ValueError):
    """Bad input: one line naming the file, document and field."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A loaded scenario: the snapshot and its pending pods (and, with the CapacityBuffer gate
    on, its buffers as resolved: their virtual pods are ``cluster.virtual_pods``)."""

    cluster: Cluster
    pending: tuple[Pod, ...]
    notes: tuple[str, ...] = ()  # for people (stderr), e.g. that prices are estimates
    buffers: tuple[tuple[capacitybuffer.BufferSpec, capacitybuffer.Resolution], ...] = ()


_KINDS: dict[str, str] = {
    "NodePool": "karpenter.sh/v1",
    "NodeClaim": "karpenter.sh/v1",
    "NodeOverlay": "karpenter.sh/v1alpha1",
    "Pod": "v1",
    "Node": "v1",
    "DaemonSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "PersistentVolumeClaim": "v1",
    "PersistentVolume": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
    "InstanceType": "simulation.karpenter.sh/v1alpha1",
    "InstanceTypeCatalog": "simulation.karpenter.sh/v1alpha1",
    "CapacityBuffer": capacitybuffer.GROUP_VERSION,
    # read only as what a CapacityBuffer names (their pods are not made up: give the Pods)
    "PodTemplate": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "ReplicaSet": "apps/v1",
}
_REFERENCED = ("PodTemplate", "Deployment", "StatefulSet", "ReplicaSet")

_DECODERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "NodePool": lambda o: nodepool.NodePoolDoc.model_validate(o).to_core(),
    "NodeClaim": lambda o: nodeclaim.NodeClaimDoc.model_validate(o).to_core(),
    "NodeOverlay": lambda o: nodeoverlay.NodeOverlayDoc.model_validate(o).to_core(),
    "Pod": kube.pod,
    "Node": kube.node,
    "DaemonSet": kube.daemonset,
    "PodDisruptionBudget": pdb.pdb,
    "PersistentVolumeClaim": kube.pvc,
    "PersistentVolume": kube.pv,
    "StorageClass": kube.storage_class,
    "CSINode": kube.csinode,
    "InstanceType": simulation.instance_type,
    "InstanceTypeCatalog": simulation.catalog,
    "CapacityBuffer": capacitybuffer.spec_of,
    **dict.fromkeys(_REFERENCED, capacitybuffer.referenced),
}


@dataclass(frozen=True, slots=True)
class _Doc:
    source: str
    index: int
    body: Mapping[str, Any]
    item: int | None = None
    base: Path = Path()

    def where(self) -> str:
        """``file: document N [items[i]] (Kind namespace/name)``."""
        kind = self.body.get("kind", "?")
        meta = self.body.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name = meta.get("name") or ""
        ns = meta.get("namespace")
        ident = f"{ns}/{name}" if ns and name else str(name)
        item = "" if self.item is None else f" items[{self.item}]"
        return f"{self.source}: document {self.index}{item} ({kind} {ident})".replace(" )", ")")


def _documents(source: str, text: str, base: Path) -> Iterator[_Doc]:
    try:
        raw_docs = documents.read(text)
    except (yaml.YAMLError, ValueError) as err:  # ValueError: PyYAML's out-of-range dates
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or (
            "invalid YAML" if isinstance(err, yaml.YAMLError) else str(err)
        )
        raise ScenarioError(f"{source}: invalid YAML{where}: {problem}") from None
    for index, body in enumerate(raw_docs, 1):
        if body is None:
            continue
        if not isinstance(body, Mapping):
            raise ScenarioError(f"{source}: document {index}: expected a Kubernetes object")
        if body.get("kind") == "List":
            items = body.get("items") or []
            if not isinstance(items, list):
                raise ScenarioError(f"{source}: document {index} (List): items: expected a list")
            for sub, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise ScenarioError(
                        f"{source}: document {index} (List): items[{sub}]: expected an object"
                    )
                yield _Doc(source, index, item, sub, base)
            continue
        yield _Doc(source, index, body, None, base)


def _decode(doc: _Doc) -> tuple[str, object]:
    kind = doc.body.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        known = ", ".join(sorted(_KINDS))
        raise ScenarioError(f"{doc.where()}: kind: unknown kind {kind!r} (known: {known})")
    if doc.body.get("apiVersion") != _KINDS[kind]:
        got = doc.body.get("apiVersion")
        raise ScenarioError(f"{doc.where()}: apiVersion: {kind} needs {_KINDS[kind]}, got {got!r}")
    try:
        value = _DECODERS[kind](doc.body)
    except DecodeError as err:
        raise ScenarioError(f"{doc.where()}: {err}") from None
    except ValidationError as err:
        first = err.errors()[0]
        path = crdfields.pydantic_path(tuple(first["loc"]))
        msg = " ".join(str(first["msg"]).removeprefix("Value error, ").split())
        raise ScenarioError(f"{doc.where()}: {path}: {msg}") from None
    if isinstance(value, simulation.CatalogSpec):
        value = _preset(doc, value)
    return kind, value


def _preset(doc: _Doc, spec: simulation.CatalogSpec) -> simulation.CatalogSpec:
    """Resolve a catalog preset's ``priceFile`` against the file that names it."""
    if spec.price_file:
        return dataclasses.replace(spec, price_file=str(doc.base / spec.price_file))
    return spec


def _name(kind: str, value: object) -> tuple[str, str, str]:
    ns = getattr(value, "namespace", "")
    name = getattr(value, "name", "")
    return (kind, str(ns), str(name))


def _read(paths: Sequence[str], stdin_text: str | None) -> Iterator[tuple[str, str, Path]]:
    for path in paths:
        if path == "-":
            yield "<stdin>", stdin_text or "", Path.cwd()
            continue
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as err:
            raise ScenarioError(f"{path}: cannot read: {err.strerror}") from None
        yield path, text, Path(path).resolve().parent


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load(
    paths: Sequence[str], stdin_text: str | None = None, settings: Settings | None = None
) -> Scenario:
    """Load scenario files into a snapshot (raises ScenarioError)."""
    with _gc_paused():
        return _load(paths, stdin_text, settings)


def _load(paths: Sequence[str], stdin_text: str | None, settings: Settings | None) -> Scenario:
    objects: dict[str, list[object]] = {k: [] for k in _KINDS}
    seen: dict[tuple[str, str, str], str] = {}
    for source, text, base in _read(paths, stdin_text):
        for doc in _documents(source, text, base):
            kind, value = _decode(doc)
            if kind != "InstanceTypeCatalog":
                key = _name(kind, value)
                if key in seen:
                    raise ScenarioError(
                        f"{doc.where()}: metadata.name: duplicate {kind} (first in {seen[key]})"
                    )
                seen[key] = f"{doc.source} document {doc.index}"
            objects[kind].append(value)
    gates = settings.feature_gates if settings is not None else None
    scenario = _scenario(objects, gates is not None and gates["NodeOverlay"])
    return _with_buffers(scenario, objects, gates is not None and gates["CapacityBuffer"])


def _with_buffers(scenario: Scenario, objects: Mapping[str, list[object]], gate: bool) -> Scenario:
    """The buffers resolved against the scenario's documents, their virtual pods in the
    snapshot; behind the CapacityBuffer gate, as in the controller."""
    specs = [b for b in objects["CapacityBuffer"] if isinstance(b, capacitybuffer.BufferSpec)]
    if not specs:
        return scenario
    if not gate:
        note = f"{len(specs)} CapacityBuffer(s) ignored: FEATURE_GATES=CapacityBuffer=true is off"
        return dataclasses.replace(scenario, notes=(*scenario.notes, note))
    found = [o for k in _REFERENCED for o in objects[k] if isinstance(o, capacitybuffer.Referenced)]
    resolved = capacitybuffer.resolve_all(specs, found)
    virtual = tuple(
        p for _, r in resolved if r.buffer is not None for p in buffers.virtual_pods(r.buffer)
    )
    notes = [
        f"CapacityBuffer {spec.key} not ready ({r.reason}): {r.message}"
        for spec, r in resolved
        if not r.ready
    ]
    labels = dict(scenario.cluster.namespace_labels)
    for spec in specs:
        labels.setdefault(spec.namespace, {"kubernetes.io/metadata.name": spec.namespace})
    cluster = dataclasses.replace(
        scenario.cluster, virtual_pods=virtual, namespace_labels=dict(sorted(labels.items()))
    )
    return dataclasses.replace(
        scenario, cluster=cluster, notes=(*scenario.notes, *notes), buffers=resolved
    )


def _catalog(objects: Mapping[str, list[object]]) -> tuple[tuple[InstanceType, ...], list[str]]:
    explicit = [t for t in objects["InstanceType"] if isinstance(t, InstanceType)]
    presets = [c for c in objects["InstanceTypeCatalog"] if isinstance(c, simulation.CatalogSpec)]
    if not explicit and not presets:
        # the contract's default: the aws preset for AWS_REGION (or us-west-2)
        presets = [simulation.CatalogSpec("aws")]
    types: list[InstanceType] = list(explicit)
    notes: list[str] = []
    for preset in presets:
        try:
            built = registry.catalog_preset(preset)
        except CatalogError as err:
            raise ScenarioError(str(err)) from None
        types.extend(built.types)
        if built.note:
            notes.append(built.note)
    names = [t.name for t in types]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ScenarioError(f"InstanceType: metadata.name: duplicate instance type {dupes[0]}")
    return tuple(types), notes


def _scenario(objects: Mapping[str, list[object]], overlay_gate: bool) -> Scenario:
    def of(kind: str, cls: type[Any]) -> tuple[Any, ...]:
        return tuple(o for o in objects[kind] if isinstance(o, cls))

    types, notes = _catalog(objects)
    pools: tuple[NodePool, ...] = of("NodePool", NodePool)
    pods: tuple[Pod, ...] = of("Pod", Pod)
    pdbs = tuple(
        b.resolve(pods) if isinstance(b, pdb.UnresolvedBudget) else b
        for b in objects["PodDisruptionBudget"]
        if isinstance(b, (PodDisruptionBudget, pdb.UnresolvedBudget))
    )
    namespaced = (*pods, *pdbs, *objects["DaemonSet"], *objects["PersistentVolumeClaim"])
    namespaces = sorted({str(getattr(o, "namespace", "")) for o in namespaced} - {""})
    cluster = Cluster(
        nodepools=pools,
        instance_types={
            p.name: overlays.apply(p, types, of("NodeOverlay", NodeOverlay))
            if overlay_gate
            else types
            for p in pools
        },
        nodes=of("Node", Node),
        nodeclaims=of("NodeClaim", NodeClaim),
        pods=pods,
        daemonsets=of("DaemonSet", DaemonSet),
        pdbs=pdbs,
        pvcs=of("PersistentVolumeClaim", PersistentVolumeClaim),
        pvs=of("PersistentVolume", PersistentVolume),
        storage_classes=of("StorageClass", StorageClass),
        csinodes=of("CSINode", CSINode),
        overlays=of("NodeOverlay", NodeOverlay),
        namespace_labels={ns: {"kubernetes.io/metadata.name": ns} for ns in namespaces},
    )
    pending = tuple(
        p for p in pods if not p.node_name and not p.is_terminal() and not p.is_daemonset_pod()
    )
    return Scenario(cluster, pending, tuple(notes))
