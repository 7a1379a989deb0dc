"""CapacityBuffers (feature gate ``CapacityBuffer``): resolve each buffer as it changes, keep its
virtual pods, and say after each provisioning pass whether its headroom exists.

Watched, not polled: the informers deliver CapacityBuffers and PodTemplates into the mirror, and
a change of a buffer, or of a PodTemplate a buffer names, queues that buffer. A reconcile
resolves it (``api.capacitybuffer``: the PodTemplate from the mirror, a ``scalableRef``
Deployment / StatefulSet / ReplicaSet by a GET, as upstream reads it), writes its status when
that changed (``ReadyForProvisioning``: ``Resolved``, ``PodTemplateNotFound``,
``ScalableRefNotFound``, ``ResolutionFailed``; ``replicas``, ``podTemplateRef``,
``podTemplateGeneration``, ``provisioningStrategy``), keeps its virtual pods in the mirror
(``state.virtualpods``: every provisioning pass and every disruption what-if reads them), and
asks for a provisioning pass. Each buffer is looked at again after ``requeue_s`` (30 s, as
upstream requeues): workloads are read, not watched, and the pass it asks for launches headroom
again once real pods took it.

Before the first decisions of a new leader, every buffer is resolved once (``warm``), so the
provisioner and disruption never see a cluster without its buffers (upstream hydrates its
virtual-pod cache during warm-up for the same reason). After each provisioning pass
``report`` writes upstream's ``Provisioning`` condition (``core.buffers``) where it changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.api import capacitybuffer as api
from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core import buffers
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.results import Results
from karpenter.kube import codec, errors
from karpenter.kube.client import CAPACITYBUFFERS, KubeClient, Obj, Resource
from karpenter.state.cluster import ClusterState

REQUEUE_S = 30.0


class CapacityBuffers(Controller):
    """Resolves buffers into virtual pods and reports their headroom (leader only)."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        requeue_s: float = REQUEUE_S,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(ctx, "capacitybuffer")
        self.requeue_s = requeue_s
        self.on_change = on_change
        self.queue: KeyedQueue[str] = KeyedQueue(self.clock, "capacitybuffer")
        self.state.virtual_pods.warm = False
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "CapacityBuffer":
            self.queue.add(key)
        elif kind == "PodTemplate":
            namespace, _, name = key.partition("/")
            for buffer_key, entry in list(self.state.capacity_buffers.entries.items()):
                spec = entry.value
                if spec is not None and (spec.namespace, spec.template) == (namespace, name):
                    self.queue.add(buffer_key)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Resolve every buffer once (warm), then reconcile them as they change, forever."""
        for key in sorted(self.state.capacity_buffers.entries):
            try:
                again = await self.reconcile(key)
            except (errors.ApiError, OSError) as err:
                self._log.warning("capacity buffer reconcile failed", buffer=key, error=str(err))
                again = self.requeue_s
            if again is not None:
                self.queue.add_after(key, again)
        self.state.virtual_pods.warm = True
        task_status.started()
        await self.queue.run(self.reconcile, 4)

    async def reconcile(self, key: str) -> float | None:
        """Resolve one buffer, write its status, keep its virtual pods; when to look again."""
        raw = self.state.capacity_buffers.raw(key)
        if raw is None or codec.meta(raw).get("deletionTimestamp"):
            self.state.virtual_pods.set(key, ())
            return None
        spec = self.state.capacity_buffers.get(key)
        if spec is None:
            problem = self.state.capacity_buffers.invalid.get(key, "invalid CapacityBuffer")
            resolution = api.Resolution(None, "ResolutionFailed", problem)
        else:
            resolution = await self._resolve(spec)
        await self._write_ready(raw, resolution)
        pods = buffers.virtual_pods(resolution.buffer) if resolution.buffer is not None else ()
        self.state.virtual_pods.set(key, pods)
        self._log.debug(
            "buffer reconciled", buffer=key, reason=resolution.reason, virtual_pods=len(pods)
        )
        if pods and self.on_change is not None:
            self.on_change()  # upstream asks for a pass on every successful reconcile
        return self.requeue_s

    async def _resolve(self, spec: api.BufferSpec) -> api.Resolution:
        return await resolve(self.kube, self.state, spec)

    async def _write_ready(self, raw: Obj, resolution: api.Resolution) -> None:
        status = "True" if resolution.ready else "False"
        await self._write(
            raw, api.READY, status, resolution.reason, resolution.message, resolution.status
        )

    async def _write(
        self,
        raw: Obj,
        kind: str,
        status: str,
        reason: str,
        message: str,
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        now = self.clock.now()
        generation = codec.meta(raw).get("generation")

        def change(conds: list[Obj]) -> bool:
            changed = codec.set_condition(conds, kind, status, reason, message, now)
            for cond in conds:
                if cond.get("type") == kind and cond.get("observedGeneration") != generation:
                    cond["observedGeneration"] = generation
                    changed = True
            return changed

        obj = await conditions.update(
            self.kube,
            CAPACITYBUFFERS,
            codec.name(raw),
            change,
            raw=raw,
            status=fields,
            namespace=codec.namespace(raw),
        )
        if obj is not None:
            self.state.capacity_buffers.upsert(obj)

    async def report(self, results: Results, virtual: Sequence[Pod]) -> None:
        """After a provisioning pass: each buffer's ``Provisioning`` condition, where it changed
        (a failed write is logged; the pass itself is done)."""
        placed = buffers.placements(results, virtual)
        for key in sorted(self.state.capacity_buffers.entries):
            raw = self.state.capacity_buffers.raw(key)
            if raw is None:
                continue
            replicas = (raw.get("status") or {}).get("replicas")
            condition = buffers.provisioning_condition(
                codec.condition_true(raw, api.READY),
                replicas if isinstance(replicas, int) else None,
                placed.get(key),
            )
            current = codec.condition(raw, api.PROVISIONING) or {}
            if condition is None or (
                current.get("status"),
                current.get("reason"),
                current.get("message"),
            ) == (condition.status, condition.reason, condition.message):
                continue
            try:
                await self._write(
                    raw, api.PROVISIONING, condition.status, condition.reason, condition.message
                )
            except (errors.ApiError, OSError) as err:
                self._log.warning("buffer status write failed", buffer=key, error=str(err))


async def resolve(kube: KubeClient, state: ClusterState, spec: api.BufferSpec) -> api.Resolution:
    """Resolve ``spec`` read-only: its PodTemplate from the mirror, a ``scalableRef`` workload
    by a GET (``karpenter explain`` resolves buffers the same way, writing nothing)."""
    src = api.source(spec)
    if isinstance(src, api.Resolution):
        return src
    found: Obj | None
    if src.kind == "PodTemplate":
        template = state.pod_templates.raw(f"{spec.namespace}/{src.name}")
        found = dict(template) if template is not None else None
    else:
        workload = Resource("apps", "v1", src.plural, src.kind, namespaced=True)
        try:
            found = await kube.get(workload, src.name, spec.namespace)
        except errors.NotFound:
            found = None
    return api.resolve(spec, src, found)
