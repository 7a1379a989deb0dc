"""NodeClaim termination: the ``karpenter.sh/termination`` finalizer on a deleted NodeClaim.

A deleted NodeClaim keeps its finalizer until its instance is gone: its Node is deleted
first (draining that Node arrives with the node-termination controller in a later change),
then ``CloudProvider.delete`` is called until it answers NodeClaimNotFound, as the port's
contract says, and only then is the finalizer removed, with the object's resourceVersion as
an optimistic lock so a concurrent finalizer change by someone else is never lost.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import anyio
import anyio.abc
import structlog

from karpenter.aio.clock import Clock
from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.cloud.provider import CloudProvider, NodeClaimNotFoundError
from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS, NODES, KubeClient, Obj
from karpenter.observability.metrics import Metrics
from karpenter.state.cluster import ClusterState

INSTANCE_POLL_S = 1.0


class Termination:
    """Finalizes deleted NodeClaims."""

    def __init__(
        self,
        kube: KubeClient,
        state: ClusterState,
        cloud: CloudProvider,
        clock: Clock,
        metrics: Metrics,
        *,
        concurrency: int = 100,
    ) -> None:
        self.kube = kube
        self.state = state
        self.cloud = cloud
        self.clock = clock
        self.metrics = metrics
        self.concurrency = concurrency
        self.queue: KeyedQueue[str] = KeyedQueue(clock, "nodeclaim.termination")
        # The most recent finalized claims (tests, logs); bounded for a long-running process.
        self.terminated: deque[str] = deque(maxlen=10_000)
        self._log = structlog.get_logger().bind(controller="nodeclaim.termination")
        state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "NodeClaim" and obj is not None and codec.meta(obj).get("deletionTimestamp"):
            self.queue.add(key)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Finalize deleted NodeClaims forever."""
        for name, entry in list(self.state.nodeclaims.entries.items()):
            if codec.meta(entry.raw).get("deletionTimestamp"):
                self.queue.add(name)
        task_status.started()
        await self.queue.run(self.reconcile, self.concurrency)

    async def reconcile(self, name: str) -> float | None:
        """Delete the Node and the instance, then release the finalizer."""
        raw = self.state.nodeclaims.raw(name)
        claim = self.state.nodeclaims.get(name)
        if raw is None or not codec.meta(raw).get("deletionTimestamp"):
            return None
        finalizers = list(codec.meta(raw).get("finalizers") or [])
        if lbl.FINALIZER_TERMINATION not in finalizers:
            return None
        log = self._log.bind(nodeclaim=name)
        if claim is not None and not await self._instance_gone(claim, log):
            return INSTANCE_POLL_S
        await self._release(raw, finalizers, log)
        return None

    async def _instance_gone(self, claim: NodeClaim, log: Any) -> bool:
        """Delete the claim's Node(s), then ask the cloud to terminate; True once it is gone."""
        nodes = self.state.node_by_provider_id(claim.provider_id) if claim.provider_id else []
        for node in nodes:
            if codec.meta(node).get("deletionTimestamp"):
                continue  # already going; counted when it was deleted
            try:
                await self.kube.delete(NODES, codec.name(node))
            except errors.NotFound:
                continue
            node_labels = codec.meta(node).get("labels") or {}
            self.metrics.nodes_terminated.labels(
                nodepool=node_labels.get(lbl.NODEPOOL, ""), zone=node_labels.get(lbl.ZONE, "")
            ).inc()
        try:
            await self.cloud.delete(claim)
        except NodeClaimNotFoundError:
            return True
        log.info("instance terminating")
        return False

    async def _release(self, raw: Obj, finalizers: list[str], log: Any) -> None:
        name = codec.name(raw)
        finalizers.remove(lbl.FINALIZER_TERMINATION)
        patch = {
            "metadata": {
                "finalizers": finalizers,
                "resourceVersion": codec.meta(raw).get("resourceVersion"),
            }
        }
        try:
            await self.kube.merge_patch(NODECLAIMS, name, patch)
        except errors.NotFound:
            return
        self.terminated.append(name)
        labels = codec.meta(raw).get("labels") or {}
        self.metrics.nodeclaims_terminated.labels(
            nodepool=labels.get(lbl.NODEPOOL, ""),
            capacity_type=labels.get(lbl.CAPACITY_TYPE, ""),
            zone=labels.get(lbl.ZONE, ""),
        ).inc()
        log.info("terminated")
