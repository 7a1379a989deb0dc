"""NodeClaim termination: the ``karpenter.sh/termination`` finalizer on a deleted NodeClaim.

A deleted NodeClaim keeps its finalizer until its instance is gone. First its termination
timestamp is stamped (deletion time + ``terminationGracePeriod``, the deadline the drain
works to) unless a forceful path already set one. Then its Node is deleted and this waits
for the Node to disappear: the Node's own finalizer (``node_termination``) drains it. Then
``CloudProvider.delete`` is called until it answers NodeClaimNotFound, as the port's contract
says, and only then is the finalizer removed, with the object's resourceVersion as an
optimistic lock so a concurrent finalizer change by someone else is never lost.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import anyio
import anyio.abc

from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.cloud.provider import NodeClaimNotFoundError
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core import termination as term
from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, NODES, Obj

INSTANCE_POLL_S = 1.0


class Termination(Controller):
    """Finalizes deleted NodeClaims."""

    def __init__(self, ctx: ControllerContext, *, concurrency: int = 100) -> None:
        super().__init__(ctx, "nodeclaim.termination")
        self.concurrency = concurrency
        self.queue: KeyedQueue[str] = KeyedQueue(self.clock, "nodeclaim.termination")
        # The most recent finalized claims (tests, logs); bounded for a long-running process.
        self.terminated: deque[str] = deque(maxlen=10_000)
        self.state.subscribe(self._on_change)

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
        if claim is not None:
            await self._stamp_deadline(raw, claim)
        if claim is not None and not await self._instance_gone(claim, log):
            return INSTANCE_POLL_S
        await self._release(raw, finalizers, log)
        return None

    async def _stamp_deadline(self, raw: Obj, claim: NodeClaim) -> None:
        """Annotate the termination timestamp the drain works to, and say so in an Event."""
        annotations = codec.meta(raw).get("annotations") or {}
        deleted = codec.parse_time(codec.meta(raw).get("deletionTimestamp"))
        deadline = term.termination_deadline(deleted, claim.termination_grace_seconds)
        if deadline is None or lbl.TERMINATION_TIMESTAMP in annotations:
            return
        stamp = codec.rfc3339(deadline)
        try:
            obj = await self.kube.merge_patch(
                NODECLAIMS,
                claim.name,
                {"metadata": {"annotations": {lbl.TERMINATION_TIMESTAMP: stamp}}},
            )
        except errors.NotFound:
            return
        self.state.nodeclaims.upsert(obj)
        await self.recorder.publish(
            codec.object_reference(raw),
            events.WARNING,
            "TerminationGracePeriodExpiring",
            f"All pods will be deleted by {stamp}",
        )

    async def _instance_gone(self, claim: NodeClaim, log: Any) -> bool:
        """Delete the claim's Node(s) and wait until they are gone (their finalizer drains
        them), then ask the cloud to terminate; True once the instance is gone."""
        nodes = self.state.node_by_provider_id(claim.provider_id) if claim.provider_id else []
        for node in nodes:
            if codec.meta(node).get("deletionTimestamp"):
                continue  # already going
            try:
                await self.kube.delete(NODES, codec.name(node))
            except errors.NotFound:
                continue
            if lbl.FINALIZER_TERMINATION in (codec.meta(node).get("finalizers") or []):
                continue  # counted by node termination when it lets the Node go
            node_labels = codec.meta(node).get("labels") or {}
            self.metrics.nodes_terminated.labels(
                nodepool=node_labels.get(lbl.NODEPOOL, ""), zone=node_labels.get(lbl.ZONE, "")
            ).inc()
        if any(lbl.FINALIZER_TERMINATION in (codec.meta(n).get("finalizers") or []) for n in nodes):
            return False  # still draining
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
