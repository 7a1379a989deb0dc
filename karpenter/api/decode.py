"""Whole-object decoders for the controller: apiserver JSON → core values, one error type.

The same boundary decoders ``simulate`` uses (``api.kube`` for built-in kinds, the pydantic
CRD models for NodePools and NodeClaims), wrapped so that every failure is a ``CodecError``
naming the field, whichever decoder raised it. A provider decodes its own kinds with ``wrap``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from karpenter.api import capacitybuffer, crdfields, kube, nodeclaim, nodeoverlay, nodepool
from karpenter.api import pdb as pdb_mod
from karpenter.api.errors import DecodeError
from karpenter.core.model.cluster import DaemonSet, NodeOverlay, PodDisruptionBudget
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

T = TypeVar("T")


class CodecError(ValueError):
    """An object cannot be decoded; the message names the field."""


def wrap(fn: Callable[[Mapping[str, Any]], T], obj: Mapping[str, Any]) -> T:
    """``fn(obj)`` with every decoding failure turned into one ``CodecError`` naming the field."""
    try:
        return fn(obj)
    except DecodeError as err:
        raise CodecError(str(err)) from None
    except ValidationError as err:
        first = err.errors()[0]
        path = crdfields.pydantic_path(tuple(first["loc"]))
        raise CodecError(f"{path}: {first['msg']}") from None


def pod(obj: Mapping[str, Any]) -> Pod:
    """A v1 Pod."""
    return wrap(kube.pod, obj)


def node(obj: Mapping[str, Any]) -> Node:
    """A v1 Node."""
    return wrap(kube.node, obj)


def daemonset(obj: Mapping[str, Any]) -> DaemonSet:
    """An apps/v1 DaemonSet."""
    return wrap(kube.daemonset, obj)


def node_pool(obj: Mapping[str, Any]) -> NodePool:
    """A karpenter.sh/v1 NodePool (runtime validation included)."""
    return wrap(lambda o: nodepool.NodePoolDoc.model_validate(o).to_core(), obj)


def node_claim(obj: Mapping[str, Any]) -> NodeClaim:
    """A karpenter.sh/v1 NodeClaim."""
    return wrap(lambda o: nodeclaim.NodeClaimDoc.model_validate(o).to_core(), obj)


def pdb(obj: Mapping[str, Any]) -> PodDisruptionBudget | pdb_mod.UnresolvedBudget:
    """A policy/v1 PodDisruptionBudget (unresolved until the disruption controller's status)."""
    return wrap(pdb_mod.pdb, obj)


def pvc(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    """A v1 PersistentVolumeClaim."""
    return wrap(kube.pvc, obj)


def pv(obj: Mapping[str, Any]) -> PersistentVolume:
    """A v1 PersistentVolume."""
    return wrap(kube.pv, obj)


def storage_class(obj: Mapping[str, Any]) -> StorageClass:
    """A storage.k8s.io/v1 StorageClass."""
    return wrap(kube.storage_class, obj)


def csinode(obj: Mapping[str, Any]) -> CSINode:
    """A storage.k8s.io/v1 CSINode."""
    return wrap(kube.csinode, obj)


def namespace_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    """A v1 Namespace's labels (what namespaceSelector terms match)."""
    meta = wrap(lambda o: kube.map_of(o.get("metadata"), "metadata"), obj)
    labels = meta.get("labels") or {}
    result = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
    result.setdefault("kubernetes.io/metadata.name", str(meta.get("name", "")))
    return result


def node_overlay(obj: Mapping[str, Any]) -> NodeOverlay:
    """A karpenter.sh/v1alpha1 NodeOverlay."""
    return wrap(lambda o: nodeoverlay.NodeOverlayDoc.model_validate(o).to_core(), obj)


def capacity_buffer(obj: Mapping[str, Any]) -> capacitybuffer.BufferSpec:
    """An autoscaling.x-k8s.io/v1beta1 CapacityBuffer's spec (resolved by its controller)."""
    return wrap(capacitybuffer.spec_of, obj)


def pod_template(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A v1 PodTemplate, kept as it is (a buffer's chunk is decoded when it is resolved)."""

    def checked(o: Mapping[str, Any]) -> Mapping[str, Any]:
        kube.map_of(o.get("template"), "template")
        return o

    return wrap(checked, obj)
