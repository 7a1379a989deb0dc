"""CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``) decoded, and resolved against its chunk source.

A buffer's chunk comes from ``spec.podTemplateRef`` (a v1 PodTemplate in its namespace) or from
``spec.scalableRef``: a Deployment, StatefulSet or ReplicaSet (API group ``apps``; an empty group
means ``apps``, as upstream Karpenter reads it) in its namespace, whose ``spec.template`` is the
chunk and whose ``spec.replicas`` (default 1: what its scale subresource reports as desired) is
what ``percentage`` is taken of. Upstream Karpenter reads the workload itself rather than the
newest pod behind the scale subresource (Cluster Autoscaler's way), so a buffer is ready
before the workload has any pod; so does this module.

Resolution is in two steps so the controller (which GETs) and ``simulate`` (which has the
documents) share it: ``source`` says which object to read, ``resolve`` turns what was found
(or nothing) into a ``Resolution``: the core ``Buffer`` and the status upstream's buffer
controller writes (``ReadyForProvisioning`` with ``Resolved`` / ``PodTemplateNotFound`` /
``ScalableRefNotFound`` / ``ResolutionFailed``, ``replicas``, ``podTemplateRef``,
``podTemplateGeneration``, ``provisioningStrategy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from karpenter.api import kube as k
from karpenter.api.errors import DecodeError
from karpenter.core.buffers import Buffer, desired_replicas
from karpenter.core.model.pod import Pod
from karpenter.core.model.resources import Resources

GROUP_VERSION = "autoscaling.x-k8s.io/v1beta1"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
READY = "ReadyForProvisioning"
PROVISIONING = "Provisioning"
# scalableRef kinds upstream resolves, with the plural the apiserver serves them under
SCALABLE_KINDS = {
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "ReplicaSet": "replicasets",
}


@dataclass(frozen=True, slots=True)
class ScalableRef:
    """``spec.scalableRef``."""

    api_group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class BufferSpec:
    """A CapacityBuffer's identity and spec, as far as resolution reads it."""

    namespace: str
    name: str
    uid: str = ""
    generation: int | None = None
    template: str = ""  # spec.podTemplateRef.name
    scalable: ScalableRef | None = None
    replicas: int | None = None
    percentage: int | None = None
    limits: Resources | None = None
    strategy: str = ACTIVE_CAPACITY

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


def _count(spec: Mapping[str, Any], name: str) -> int | None:
    value = spec.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise DecodeError(f"spec.{name}", "must be a non-negative integer")
    return value


def _scalable(spec: Mapping[str, Any]) -> ScalableRef | None:
    if spec.get("scalableRef") is None:
        return None
    ref = k.map_of(spec.get("scalableRef"), "spec.scalableRef")
    return ScalableRef(
        str(ref.get("apiGroup") or ""), str(ref.get("kind") or ""), str(ref.get("name") or "")
    )


def spec_of(obj: Mapping[str, Any]) -> BufferSpec:
    """Decode a CapacityBuffer (raises DecodeError naming the field)."""
    meta = k.map_of(obj.get("metadata"), "metadata")
    spec = k.map_of(obj.get("spec"), "spec")
    template = k.map_of(spec.get("podTemplateRef"), "spec.podTemplateRef")
    generation = meta.get("generation")
    return BufferSpec(
        namespace=str(meta.get("namespace") or "default"),
        name=k.name_of(meta),
        uid=str(meta.get("uid") or ""),
        generation=generation if isinstance(generation, int) else None,
        template=str(template.get("name") or ""),
        scalable=_scalable(spec),
        replicas=_count(spec, "replicas"),
        percentage=_count(spec, "percentage"),
        limits=k.resources(spec.get("limits"), "spec.limits") if spec.get("limits") else None,
        strategy=str(spec.get("provisioningStrategy") or ACTIVE_CAPACITY),
    )


@dataclass(frozen=True, slots=True)
class Source:
    """The object a buffer's chunk is read from: ``kind`` is ``PodTemplate`` or a workload's."""

    kind: str
    plural: str
    name: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """A resolved buffer (``buffer`` None when not ready) and the status to write."""

    buffer: Buffer | None
    reason: str
    message: str
    status: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """``ReadyForProvisioning`` is True."""
        return self.buffer is not None


def _failed(spec: BufferSpec, reason: str, message: str) -> Resolution:
    return Resolution(None, reason, message, {"provisioningStrategy": spec.strategy})


def source(spec: BufferSpec) -> Source | Resolution:
    """Which object holds the chunk, or the failed resolution when none can."""
    if spec.strategy != ACTIVE_CAPACITY:
        return _failed(
            spec,
            "ResolutionFailed",
            f'unsupported provisioningStrategy "{spec.strategy}" in spec.provisioningStrategy'
            f' (supported: "{ACTIVE_CAPACITY}")',
        )
    if spec.template:
        return Source("PodTemplate", "podtemplates", spec.template)
    ref = spec.scalable
    if ref is None:
        return _failed(spec, "ResolutionFailed", "Neither podTemplateRef nor scalableRef is set")
    if ref.api_group not in ("", "apps"):
        return _failed(
            spec,
            "ResolutionFailed",
            f'unsupported scalableRef API group "{ref.api_group}" in spec.scalableRef.apiGroup'
            ' (supported: "apps")',
        )
    if ref.kind not in SCALABLE_KINDS:
        return _failed(
            spec,
            "ResolutionFailed",
            f'unsupported kind "{ref.kind}" in spec.scalableRef.kind'
            f" (supported: {', '.join(sorted(SCALABLE_KINDS))})",
        )
    return Source(ref.kind, SCALABLE_KINDS[ref.kind], ref.name)


def not_found(src: Source) -> str:
    """The apiserver's NotFound message for ``src`` (what upstream's condition says)."""
    resource = src.plural if src.kind == "PodTemplate" else f"{src.plural}.apps"
    return f'{resource} "{src.name}" not found'


def resolve(spec: BufferSpec, src: Source, found: Mapping[str, Any] | None) -> Resolution:
    """The buffer resolved against ``found`` (None: the object does not exist)."""
    if found is None:
        reason = "PodTemplateNotFound" if src.kind == "PodTemplate" else "ScalableRefNotFound"
        return _failed(spec, reason, not_found(src))
    try:
        buffer = _buffer(spec, src, found)
    except DecodeError as err:
        return _failed(spec, "ResolutionFailed", str(err))
    status: dict[str, Any] = {
        "provisioningStrategy": spec.strategy,
        "replicas": desired_replicas(buffer),
        "podTemplateRef": {"name": src.name} if src.kind == "PodTemplate" else None,
        "podTemplateGeneration": (
            k.map_of(found.get("metadata"), "metadata").get("generation") or 1
            if src.kind == "PodTemplate"
            else None
        ),
    }
    return Resolution(buffer, "Resolved", "Pod template resolved successfully", status)


def _buffer(spec: BufferSpec, src: Source, found: Mapping[str, Any]) -> Buffer:
    base = Buffer(
        spec.namespace,
        spec.name,
        None,
        spec.replicas,
        spec.limits,
        spec.percentage,
        uid=spec.uid,
    )
    if src.kind == "PodTemplate":
        return replace(base, chunk=chunk(found.get("template"), spec.namespace, src.name))
    body = k.map_of(found.get("spec"), "spec")
    replicas = body.get("replicas")
    scalable = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
    pod = chunk(body.get("template"), spec.namespace, src.name, "spec.template")
    return replace(base, chunk=pod, scalable_replicas=scalable)


def chunk(template: Any, namespace: str, name: str, path: str = "template") -> Pod:
    """One chunk's pod, from a PodTemplateSpec (``template`` of a PodTemplate, or
    ``spec.template`` of a workload)."""
    body = k.map_of(template, path)
    meta = k.map_of(body.get("metadata"), f"{path}.metadata")
    pod_spec = k.map_of(body.get("spec"), f"{path}.spec")
    return Pod(
        namespace=namespace,
        name=name,
        labels=_strings(meta.get("labels"), f"{path}.metadata.labels"),
        annotations=_strings(meta.get("annotations"), f"{path}.metadata.annotations"),
        **k.pod_spec(pod_spec, f"{path}.spec"),
    )


def _strings(value: Any, path: str) -> dict[str, str]:
    return {str(key): str(v) for key, v in k.map_of(value, path).items()}


@dataclass(frozen=True, slots=True)
class Referenced:
    """An object a buffer may name (PodTemplate, Deployment, StatefulSet, ReplicaSet), kept
    whole: ``karpenter simulate`` reads these documents instead of GETting them."""

    kind: str
    namespace: str
    name: str
    body: Mapping[str, Any]


def referenced(obj: Mapping[str, Any]) -> Referenced:
    """A PodTemplate or workload document (its pod template is read when a buffer names it)."""
    meta = k.map_of(obj.get("metadata"), "metadata")
    return Referenced(
        str(obj.get("kind") or ""), str(meta.get("namespace") or "default"), k.name_of(meta), obj
    )


def resolve_all(
    specs: Sequence[BufferSpec], objects: Sequence[Referenced]
) -> tuple[tuple[BufferSpec, Resolution], ...]:
    """Every buffer resolved against ``objects`` (what is absent is not found), by key."""
    index = {(o.kind, o.namespace, o.name): o.body for o in objects}
    out = []
    for spec in sorted(specs, key=lambda s: s.key):
        src = source(spec)
        if not isinstance(src, Source):
            out.append((spec, src))
            continue
        out.append((spec, resolve(spec, src, index.get((src.kind, spec.namespace, src.name)))))
    return tuple(out)
