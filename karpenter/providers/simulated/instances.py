"""The simulated cloud's instance records: one ConfigMap per instance, kept in the cluster.

A real cloud remembers its machines when the controller restarts; so does this one. Each
launched instance is a ConfigMap named after its NodeClaim in namespace ``karpenter-simulated``
(label ``simulated.karpenter.sh/instance``), holding what the cloud knows: the provider id,
instance type, zone, capacity type, when it launched, when it boots, and the Node it registers
when it does (labels, taints, capacity, allocatable). The record exists before its Node and is
removed when the instance terminates, so at any moment: a record is a running (or booting)
instance; a simulated Node without a record is a machine that was terminated.

Nothing about an instance lives only in process memory: ``karpenter run`` can be killed at any
point and a new process finds every instance here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.node import NodeClaim
from karpenter.kube import codec, errors
from karpenter.kube.client import CONFIGMAPS, NAMESPACES, KubeClient, Obj

NAMESPACE = "karpenter-simulated"
INSTANCE_LABEL = "simulated.karpenter.sh/instance"
IMAGE_ID = "simulated-image"


@dataclass(frozen=True, slots=True)
class Record:
    """One instance as the cloud knows it."""

    name: str  # the NodeClaim's name, which is also the Node's
    provider_id: str
    node: Obj  # the Node manifest it registers when it boots
    launched_at: float
    boot_at: float

    @property
    def labels(self) -> Mapping[str, str]:
        return dict(codec.meta(self.node).get("labels") or {})

    def claim(self) -> NodeClaim:
        """The launched NodeClaim as the CloudProvider port reports it."""
        status = self.node.get("status") or {}
        labels = dict(self.labels)
        labels.pop(lbl.DO_NOT_SYNC_TAINTS, None)  # the kubelet's own, not the claim's
        return NodeClaim(
            self.name,
            labels.get(lbl.NODEPOOL, ""),
            dict(sorted(labels.items())),
            provider_id=self.provider_id,
            image_id=IMAGE_ID,
            capacity=res.parse(status.get("capacity") or {}),
            allocatable=res.parse(status.get("allocatable") or {}),
            launched=True,
            creation=self.launched_at,
        )

    def manifest(self) -> Obj:
        """The ConfigMap that stores the record."""
        labels = self.labels
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": NAMESPACE,
                "labels": {
                    INSTANCE_LABEL: "true",
                    lbl.NODEPOOL: labels.get(lbl.NODEPOOL, ""),
                },
            },
            "data": {
                "providerID": self.provider_id,
                "instanceType": labels.get(lbl.INSTANCE_TYPE, ""),
                "zone": labels.get(lbl.ZONE, ""),
                "capacityType": labels.get(lbl.CAPACITY_TYPE, ""),
                "launchedAt": codec.rfc3339(self.launched_at),
                "bootAt": codec.rfc3339(self.boot_at),
                "node": json.dumps(self.node, sort_keys=True),
            },
        }

    @staticmethod
    def of(obj: Mapping[str, Any]) -> Record | None:
        """The record a ConfigMap holds, or None when it is not one (or is damaged)."""
        data = obj.get("data") or {}
        try:
            node = json.loads(str(data["node"]))
            launched = codec.parse_time(str(data["launchedAt"]))
            boot = codec.parse_time(str(data["bootAt"]))
        except (KeyError, ValueError):
            return None
        if not isinstance(node, dict) or launched is None or boot is None:
            return None
        return Record(codec.name(obj), str(data.get("providerID", "")), node, launched, boot)


class Records:
    """The record store: create, read, list, delete (every call goes to the apiserver)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def ensure_namespace(self) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        try:
            await self.kube.create(NAMESPACES, body)
        except errors.AlreadyExists:
            pass

    async def create(self, record: Record) -> Record:
        """Store ``record``; if one of that name exists, that one (a retried launch)."""
        try:
            await self.kube.create(CONFIGMAPS, record.manifest(), NAMESPACE)
        except errors.AlreadyExists:
            existing = await self.get(record.name)
            if existing is not None:
                return existing
            raise
        return record

    async def get(self, name: str) -> Record | None:
        try:
            return Record.of(await self.kube.get(CONFIGMAPS, name, NAMESPACE))
        except errors.NotFound:
            return None

    async def list(self) -> list[Record]:
        items, _ = await self.kube.list(
            CONFIGMAPS, NAMESPACE, label_selector=f"{INSTANCE_LABEL}=true"
        )
        found = (Record.of(item) for item in items)
        return sorted((r for r in found if r is not None), key=lambda r: r.name)

    async def delete(self, name: str) -> bool:
        """Remove the record; False when there was none."""
        try:
            await self.kube.delete(CONFIGMAPS, name, NAMESPACE)
        except errors.NotFound:
            return False
        return True
