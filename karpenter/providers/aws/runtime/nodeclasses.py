"""EC2NodeClasses in the cluster: the informer-fed mirror the provider reads, its writer, and
the views over NodeClasses and the mirror that the zonal-shift and profile collectors read.

``NodeClasses.patch`` writes the status subresource, the annotations and the termination
finalizer in one place; ``ShiftAudience`` gives the zonal-shift poller the active NodePools
with their NodeClass's zones and posts its Events; ``ProfileRefs`` names the instance profiles
still referenced (NodeClass status or NodeClaim annotation).
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import anyio.abc

from karpenter.aio.clock import Clock
from karpenter.core.model.node import NodeClassRef
from karpenter.core.scheduling.requirements import from_selector_terms
from karpenter.kube import codec, errors
from karpenter.kube.client import (
    NODEPOOLS,
    KubeClient,
    Obj,
    Resource,
)
from karpenter.kube.events import EventRecorder
from karpenter.providers.aws.api import decode as aws_decode
from karpenter.providers.aws.api.ec2nodeclass_status import status_doc
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import zonalshift
from karpenter.state.cluster import ClusterState, KindStore

# Where the apiserver serves EC2NodeClasses (the provider's own kind; the kube client is generic).
EC2NODECLASSES = Resource("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass")
NODECLASS_FINALIZER = "karpenter.k8s.aws/termination"


class NodeClasses:
    """EC2NodeClasses: the mirror the provider reads, and the writer of status/finalizer."""

    def __init__(self, kube: KubeClient, clock: Clock) -> None:
        self.kube = kube
        self.clock = clock
        self.changed = anyio.Event()
        self.store: KindStore[nc.EC2NodeClass] = KindStore(
            "EC2NodeClass", aws_decode.ec2_node_class, self._notify
        )

    def _notify(self, kind: str, key: str, obj: Obj | None) -> None:
        del kind, key, obj
        self.changed.set()

    def generation(self, ref: NodeClassRef) -> int | None:
        """The generation of the EC2NodeClass ``ref`` names (None: another kind, or absent)."""
        if (ref.group, ref.kind) != (EC2NODECLASSES.group, EC2NODECLASSES.kind):
            return None
        raw = self.store.raw(ref.name)
        generation = codec.meta(raw).get("generation") if raw is not None else None
        return generation if isinstance(generation, int) else None

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        """The NodeClass by name (None when absent or invalid)."""
        return self.store.get(name)

    async def patch(
        self, name: str, status: nc.Status, annotations: dict[str, str], finalizer: bool
    ) -> None:
        """Write the status (subresource), the annotations and the finalizer."""
        raw = self.store.raw(name)
        if raw is None:
            return
        meta = raw.get("metadata") or {}
        finalizers = [f for f in meta.get("finalizers") or [] if f != NODECLASS_FINALIZER]
        if finalizer:
            finalizers.append(NODECLASS_FINALIZER)
        try:
            if finalizer:
                body = {"status": status_doc(status, codec.rfc3339(self.clock.now()))}
                obj = await self.kube.merge_patch(EC2NODECLASSES, name, body, subresource="status")
                self.store.upsert(obj)
            patch = {"metadata": {"annotations": annotations, "finalizers": finalizers}}
            self.store.upsert(await self.kube.merge_patch(EC2NODECLASSES, name, patch))
        except errors.NotFound:
            return


@dataclass
class ShiftAudience:
    """NodePools and their NodeClasses' zones from the mirror; Events through the recorder."""

    state: ClusterState
    classes: NodeClasses
    recorder: EventRecorder

    async def pools(self) -> list[zonalshift.PoolView]:
        """Active NodePools with their requirements and their NodeClass's zone ids."""
        out = []
        for pool in self.state.active_nodepools():
            node_class = self.classes.store.get(pool.template.node_class_ref.name)
            subnets = node_class.status.subnets if node_class is not None else ()
            zones = {s.zone_id: s.zone for s in subnets if s.zone_id}
            reqs = from_selector_terms(pool.template.requirements)
            out.append(zonalshift.PoolView(pool.name, reqs, zones))
        return out

    async def publish(self, event: zonalshift.Event) -> None:
        """Post the Event on its NodePool."""
        raw = self.state.nodepools.raw(event.nodepool) or {}
        involved = {
            "apiVersion": NODEPOOLS.api_version,
            "kind": "NodePool",
            "name": event.nodepool,
            "uid": str((raw.get("metadata") or {}).get("uid", "")),
        }
        await self.recorder.publish(involved, event.type, event.reason, event.message)


@dataclass
class ProfileRefs:
    """Instance profiles still in use: named by a NodeClass status or a NodeClaim annotation."""

    classes: NodeClasses
    state: ClusterState

    async def referenced_profiles(self) -> set[str]:
        """Every profile a NodeClass or NodeClaim still names."""
        found = {c.status.instance_profile for c in self.classes.store.values()}
        for claim in self.state.nodeclaims.values():
            found.add(claim.annotations.get(awslbl.ANNOTATION_INSTANCE_PROFILE, ""))
        found.discard("")
        return found
