"""NodeClaims and Nodes as the AWS controllers see them: reads from the operator's mirror,
writes (labels, annotations, deletes) through the kube client, Events through the recorder.

The AWS controllers are written against small Protocols; ``ClaimsView`` implements them on
the real cluster, and ``ClaimEvents`` turns the interruption controller's synchronous
``publish`` into Events posted by a background task.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import anyio
import anyio.abc

from karpenter.core.model.node import NodeClaim
from karpenter.kube import codec, errors
from karpenter.kube.client import (
    NODECLAIMS,
    NODES,
    KubeClient,
)
from karpenter.kube.events import EventRecorder
from karpenter.providers.aws.controllers import partition as partitions
from karpenter.providers.aws.controllers import tagging
from karpenter.providers.aws.core import hashmigration, tags
from karpenter.state.cluster import ClusterState, KindStore


class ClaimsView:
    """NodeClaims and Nodes for the AWS controllers, from the operator's mirror."""

    def __init__(self, kube: KubeClient, state: ClusterState) -> None:
        self.kube = kube
        self.state = state

    async def find_by_instance_id(self, instance_id: str) -> NodeClaim | None:
        """The claim whose provider id names this instance."""
        for claim in self.state.nodeclaims.values():
            if claim.provider_id and tags.instance_id(claim.provider_id) == instance_id:
                return claim
        return None

    def all(self) -> list[NodeClaim]:
        """Every NodeClaim in the mirror."""
        return list(self.state.nodeclaims.values())

    async def relabel(self, claim: NodeClaim, labels: dict[str, str | None]) -> None:
        """Merge labels into a NodeClaim and its Node (``None`` removes one)."""
        patch = {"metadata": {"labels": labels}}
        with contextlib.suppress(errors.NotFound):
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, claim.name, patch))
        for raw in self.state.node_by_provider_id(claim.provider_id):
            name = str((raw.get("metadata") or {}).get("name", ""))
            with contextlib.suppress(errors.NotFound):
                await self.kube.merge_patch(NODES, name, patch)

    async def delete(self, name: str) -> None:
        """Delete a NodeClaim (its termination finalizer drains and terminates)."""
        with contextlib.suppress(errors.NotFound):
            await self.kube.delete(NODECLAIMS, name)

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        """Merge annotations into a NodeClaim."""
        with contextlib.suppress(errors.NotFound):
            patch = {"metadata": {"annotations": annotations}}
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))

    async def label(self, name: str, node_name: str, labels: dict[str, str]) -> None:
        """Merge labels into a NodeClaim and, when registered, its Node."""
        with contextlib.suppress(errors.NotFound):
            patch = {"metadata": {"labels": labels}}
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))
            if node_name:
                self.state.nodes.upsert(await self.kube.merge_patch(NODES, node_name, patch))

    async def label_partitions(self, reader: partitions.PartitionReader) -> float:
        """Label the partitions EC2 assigned to claims launched without one."""
        for claim in self.state.nodeclaims.values():
            await partitions.reconcile(claim, reader, self)
        return partitions.PERIOD_SECONDS

    async def tag_all(self, tagger: tagging.Tagger) -> float:
        """Tag the instances of newly registered claims (one at a time, as upstream)."""
        for claim in self.state.nodeclaims.values():
            await tagging.reconcile(claim, tagger, self)
        return 10.0

    async def claimed_provider_ids(self) -> set[str]:
        """Provider ids of every NodeClaim."""
        return {c.provider_id for c in self.state.nodeclaims.values() if c.provider_id}

    async def delete_node(self, provider_id: str) -> None:
        """Delete the Node of an instance that has no NodeClaim."""
        for raw in self.state.node_by_provider_id(provider_id):
            name = str((raw.get("metadata") or {}).get("name", ""))
            with contextlib.suppress(errors.NotFound):
                await self.kube.delete(NODES, name)

    async def names_for_nodeclass(self, name: str) -> list[str]:
        """NodeClaims that reference the EC2NodeClass ``name``."""
        return [c.name for c in await self.claim_hashes(name)]

    async def claim_hashes(self, nodeclass: str) -> list[hashmigration.ClaimHash]:
        """The class's NodeClaims with their annotations and whether a Drifted condition is set."""
        out = []
        for key, entry in self.state.nodeclaims.entries.items():
            ref = (entry.raw.get("spec") or {}).get("nodeClassRef") or {}
            if ref.get("name") != nodeclass or ref.get("kind", "EC2NodeClass") != "EC2NodeClass":
                continue
            annotations = codec.meta(entry.raw).get("annotations") or {}
            drifted = codec.condition(entry.raw, "Drifted") is not None
            out.append(hashmigration.ClaimHash(key, dict(annotations), drifted))
        return sorted(out, key=lambda c: c.name)


@dataclass
class ClaimEvents:
    """The interruption controller's synchronous ``publish``, posted by a background task."""

    recorder: EventRecorder
    claims: KindStore[NodeClaim]
    pending: list[tuple[NodeClaim, str, str]] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)

    def publish(self, claim: NodeClaim, reason: str, message: str) -> None:
        """Queue one Event about ``claim``."""
        self.pending.append((claim, reason, message))
        self.wake.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Post queued Events until cancelled."""
        task_status.started()
        while True:
            await self.wake.wait()
            self.wake = anyio.Event()
            batch, self.pending = self.pending, []
            for claim, reason, message in batch:
                raw = self.claims.raw(claim.name) or {}
                involved = {
                    "apiVersion": NODECLAIMS.api_version,
                    "kind": "NodeClaim",
                    "name": claim.name,
                    "uid": str((raw.get("metadata") or {}).get("uid", "")),
                }
                await self.recorder.publish(involved, "Warning", reason, message)
