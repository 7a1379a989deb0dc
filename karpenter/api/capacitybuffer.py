"""CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``) and its PodTemplate, decoded for the core.

Only what the controller honours is read: ``spec.podTemplateRef``, ``spec.replicas`` and
``spec.limits``; the chunk's shape is the PodTemplate's ``template`` (labels, annotations and
pod spec). ``scalableRef`` and ``percentage`` are recognised so the controller can say they are
not supported here rather than silently ignoring them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpenter.api import kube as k
from karpenter.api.errors import DecodeError
from karpenter.core.buffers import Buffer
from karpenter.core.model.pod import Pod

GROUP_VERSION = "autoscaling.x-k8s.io/v1beta1"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"


def template_name(obj: Mapping[str, Any]) -> str:
    """The PodTemplate a buffer names ("" when it names none)."""
    spec = k.map_of(obj.get("spec"), "spec")
    ref = k.map_of(spec.get("podTemplateRef"), "spec.podTemplateRef")
    return str(ref.get("name") or "")


def unsupported(obj: Mapping[str, Any]) -> str:
    """Why this controller cannot honour the buffer ("" when it can)."""
    spec = k.map_of(obj.get("spec"), "spec")
    if spec.get("scalableRef") is not None:
        return "spec.scalableRef is not supported by this controller; use spec.podTemplateRef"
    strategy = spec.get("provisioningStrategy") or ACTIVE_CAPACITY
    if strategy != ACTIVE_CAPACITY:
        return f"spec.provisioningStrategy {strategy!r} is not supported"
    if not template_name(obj):
        return "Neither podTemplateRef nor scalableRef is set"
    return ""


def chunk(template: Mapping[str, Any], namespace: str) -> Pod:
    """One chunk's pod, from a v1 PodTemplate."""
    body = k.map_of(template.get("template"), "template")
    meta = k.map_of(body.get("metadata"), "template.metadata")
    spec = k.map_of(body.get("spec"), "template.spec")
    return Pod(
        namespace=namespace,
        name=k.name_of(k.map_of(template.get("metadata"), "metadata")),
        labels=_strings(meta.get("labels"), "template.metadata.labels"),
        annotations=_strings(meta.get("annotations"), "template.metadata.annotations"),
        **k.pod_spec(spec, "template.spec"),
    )


def _strings(value: Any, path: str) -> dict[str, str]:
    return {str(key): str(v) for key, v in k.map_of(value, path).items()}


def buffer(obj: Mapping[str, Any], template: Mapping[str, Any] | None) -> Buffer:
    """The buffer resolved against its PodTemplate (``None``: not found, chunk unresolved)."""
    meta = k.map_of(obj.get("metadata"), "metadata")
    spec = k.map_of(obj.get("spec"), "spec")
    namespace = str(meta.get("namespace") or "default")
    replicas = spec.get("replicas")
    if replicas is not None and (not isinstance(replicas, int) or replicas < 0):
        raise DecodeError("spec.replicas", "must be a non-negative integer")
    limits = k.resources(spec.get("limits"), "spec.limits") if spec.get("limits") else None
    return Buffer(
        namespace,
        k.name_of(meta),
        chunk(template, namespace) if template is not None else None,
        replicas,
        limits,
    )
