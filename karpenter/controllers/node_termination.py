"""Node termination: the ``karpenter.sh/termination`` finalizer on a deleted Node.

Registration puts the finalizer on every Node Karpenter manages, so deleting the Node (by the
NodeClaim finalizer, by ``kubectl delete node``, by anyone) lands here. Each reconcile walks
upstream's steps and stops at the first that is not done:

1. The Node's NodeClaim is deleted too, so the instance goes with the Node.
2. A Node that is not Ready and whose instance the cloud no longer knows is released at once:
   nothing is left to drain.
3. Taint ``karpenter.sh/disrupted:NoSchedule`` (nothing new lands) and label it excluded from
   external load balancers (traffic stops before the machine does).
4. Drain, as ``core.termination`` plans it: evictions through the Eviction API with a UID
   precondition, so PodDisruptionBudgets are honoured; pods deleted outright once the
   NodeClaim's terminationGracePeriod says so. A refused eviction (429, or several PDBs) is an
   Event ``FailedDraining`` and a retry with per-pod back-off. ``Drained`` on the NodeClaim.
5. Wait for VolumeAttachments on the Node to go (unless the grace deadline passed), so a
   volume is detached cleanly before its instance is terminated. ``VolumesDetached``.
6. ``CloudProvider.delete`` until the instance is gone. ``InstanceTerminating``.
7. Remove the finalizer (optimistic lock on the resourceVersion).

The NodeClaim's conditions are written here because the lifecycle controller leaves deleted
claims alone; each write goes back into the mirror at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc

from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.cloud.provider import NodeClaimNotFoundError
from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core import termination as term
from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.pod import Pod
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, NODES, PODS, PVCS, VOLUMEATTACHMENTS, Obj

DRAIN_POLL_S = 1.0
INSTANCE_POLL_S = 1.0
_CONFLICT_RETRY_S = 0.1
EXCLUDE_LB = "node.kubernetes.io/exclude-from-external-load-balancers"
FORCEFUL = "Forceful Termination"


def terminating(node: Mapping[str, Any]) -> bool:
    """Deleted, and still held by our finalizer."""
    meta = codec.meta(node)
    return bool(meta.get("deletionTimestamp")) and lbl.FINALIZER_TERMINATION in (
        meta.get("finalizers") or []
    )


class NodeTermination(Controller):
    """Drains and finalizes deleted Nodes."""

    def __init__(self, ctx: ControllerContext, *, concurrency: int = 100) -> None:
        super().__init__(ctx, "node.termination")
        self.concurrency = concurrency
        self.queue: KeyedQueue[str] = KeyedQueue(self.clock, "node.termination")
        # Pods in the order they were told to leave, and finalized Nodes (tests, logs); bounded.
        self.drained_pods: deque[str] = deque(maxlen=10_000)
        self.finalized: deque[str] = deque(maxlen=10_000)
        self._refusals: dict[str, tuple[int, float]] = {}  # pod uid → (refusals, retry at)
        self._since: dict[str, float] = {}  # Node → when its drain started
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "Node" and obj is not None and terminating(obj):
            self.queue.add(key)
        elif kind == "Pod":
            # a pod leaving (or arriving) may finish a drain; deletions carry no node name
            node = str(((obj or {}).get("spec") or {}).get("nodeName") or "")
            draining = [node] if obj is not None else list(self._since)
            for name in draining:
                if name in self._since:
                    self.queue.add(name)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Finalize deleted Nodes forever."""
        for name, entry in list(self.state.nodes.entries.items()):
            if terminating(entry.raw):
                self.queue.add(name)
        task_status.started()
        await self.queue.run(self.reconcile, self.concurrency)

    async def reconcile(self, name: str) -> float | None:
        """One pass of the termination steps; returns when to look again."""
        raw = self.state.nodes.raw(name)
        if raw is None or not terminating(raw):
            self._since.pop(name, None)
            return None
        log = self._log.bind(node=name)
        try:
            return await self._terminate(raw, log)
        except errors.Conflict:
            return _CONFLICT_RETRY_S  # the Node or claim changed under us; read it again

    async def _terminate(self, raw: Obj, log: Any) -> float | None:
        claim_raw = await self._delete_claim(raw, log)
        if not codec.condition_true(raw, "Ready") and await self._instance_gone(raw):
            log.info("node not ready and its instance is gone: skipping drain")
            await self._finalize(raw, log)
            return None
        deadline = self._deadline(claim_raw)
        if deadline is not None:
            await self.recorder.publish(
                codec.object_reference(raw),
                events.WARNING,
                "TerminationGracePeriodExpiring",
                f"All pods will be deleted by {codec.rfc3339(deadline)}",
            )
        await self._taint(raw)
        wait = await self._drain(raw, claim_raw, deadline, log)
        if wait is None:
            wait = await self._await_volumes(raw, claim_raw, deadline)
        if wait is None and not await self._terminate_instance(raw, claim_raw, log):
            wait = INSTANCE_POLL_S
        if wait is None:
            await self._finalize(raw, log)
        return wait

    # ---- claim ----------------------------------------------------------------------------------

    def _claim_of(self, node: Obj) -> Obj | None:
        provider_id = str((node.get("spec") or {}).get("providerID") or "")
        names = self.state.claims_of_node(codec.name(node), provider_id)
        return self.state.nodeclaims.raw(names[0]) if names else None

    async def _delete_claim(self, node: Obj, log: Any) -> Obj | None:
        claim_raw = self._claim_of(node)
        if claim_raw is not None and not codec.meta(claim_raw).get("deletionTimestamp"):
            log.info("deleting nodeclaim of the deleted node", nodeclaim=codec.name(claim_raw))
            try:
                await self.kube.delete(NODECLAIMS, codec.name(claim_raw))
            except errors.NotFound:
                pass
        return claim_raw

    def _deadline(self, claim_raw: Obj | None) -> float | None:
        """The NodeClaim's termination timestamp: its annotation (set when the claim was
        deleted, or earlier by a forceful path), else deletion time + terminationGracePeriod."""
        if claim_raw is None:
            return None
        meta = codec.meta(claim_raw)
        stamp = (meta.get("annotations") or {}).get(lbl.TERMINATION_TIMESTAMP)
        if stamp:
            return codec.parse_time(stamp)
        claim = self.state.nodeclaims.get(codec.name(claim_raw))
        return term.termination_deadline(
            codec.parse_time(meta.get("deletionTimestamp")),
            claim.termination_grace_seconds if claim is not None else None,
        )

    async def _condition(
        self, claim_raw: Obj | None, kind: str, status: str, reason: str, message: str = ""
    ) -> None:
        """Set one condition on the NodeClaim as the mirror has it now (no-op when unchanged)."""
        current = self.state.nodeclaims.raw(codec.name(claim_raw)) if claim_raw else None
        if current is None:
            return
        now = self.clock.now()

        def change(conds: list[Obj]) -> bool:
            return codec.set_condition(conds, kind, status, reason, message, now)

        # optimistic concurrency: a condition another controller wrote meanwhile is kept
        obj = await conditions.update(
            self.kube, NODECLAIMS, codec.name(current), change, raw=current
        )
        if obj is not None:
            self.state.nodeclaims.upsert(obj)

    # ---- taint ----------------------------------------------------------------------------------

    async def _taint(self, raw: Obj) -> None:
        wanted = codec.taint(term.DISRUPTED_TAINT)
        taints = codec.taints_of(raw)
        labels = codec.meta(raw).get("labels") or {}
        if wanted in taints and labels.get(EXCLUDE_LB) == "karpenter":
            return
        # a disrupted taint with another effect or a value is replaced, not added beside
        taints = [t for t in taints if t.get("key") != lbl.TAINT_DISRUPTED] + [wanted]
        patch = {
            "metadata": {
                "labels": {EXCLUDE_LB: "karpenter"},
                "resourceVersion": codec.meta(raw).get("resourceVersion"),
            },
            "spec": {"taints": taints},
        }
        self.state.nodes.upsert(await self.kube.merge_patch(NODES, codec.name(raw), patch))

    # ---- drain ----------------------------------------------------------------------------------

    async def _drain(
        self, raw: Obj, claim_raw: Obj | None, deadline: float | None, log: Any
    ) -> float | None:
        """Run one drain pass; None once Drained."""
        name, now = codec.name(raw), self.clock.now()
        pods = self.state.pods_on(name)
        plan = term.plan_drain(pods, now, deadline)
        already = codec.condition_true(claim_raw or {}, "Drained")
        if plan.drained and already:
            return None  # e.g. after a restart while volumes or the instance were awaited
        since = self._since.setdefault(name, _drain_started(claim_raw) or now)
        if not already:
            await self._condition(claim_raw, "Drained", "Unknown", "Draining")
        if plan.drained:
            wait = term.drained_after(since, now)
            if wait > 0:
                return wait  # pods bound just before the taint was seen still get caught
            await self._drained(raw, claim_raw, log)
            return None
        for delete in plan.delete:
            await self._force_delete(delete, deadline or now, raw, claim_raw, log)
        retry = DRAIN_POLL_S
        for pod in plan.evict:
            retry = min(retry, await self._evict(pod, raw, claim_raw, log))
        if plan.held:
            log.debug("waiting on do-not-disrupt pods", pods=[p.key for p in plan.held])
        return retry

    async def _drained(self, raw: Obj, claim_raw: Obj | None, log: Any) -> None:
        current = self.state.nodeclaims.raw(codec.name(claim_raw)) if claim_raw else None
        if current is not None and codec.condition_true(current, "Drained"):
            return
        await self._condition(claim_raw, "Drained", "True", "Drained")
        nodepool = (codec.meta(raw).get("labels") or {}).get(lbl.NODEPOOL, "")
        self.metrics.nodes_drained.labels(nodepool=nodepool).inc()
        log.info("drained")

    async def _evict(self, pod: Pod, raw: Obj, claim_raw: Obj | None, log: Any) -> float:
        """Ask the Eviction API; the delay before this pod may be asked again."""
        now = self.clock.now()
        refusals, retry_at = self._refusals.get(pod.uid, (0, 0.0))
        if now < retry_at:
            return retry_at - now
        try:
            await self._evict_or_delete(pod)
        except (errors.NotFound, errors.Conflict) as err:
            self._count_eviction(err.status)  # gone, or the name holds another pod now
            self._refusals.pop(pod.uid, None)
            return DRAIN_POLL_S
        except errors.ApiError as err:
            self._count_eviction(err.status)
            delay = term.eviction_retry_s(refusals + 1)
            self._refusals[pod.uid] = (refusals + 1, now + delay)
            await self._refused(pod, err, raw, claim_raw, log)
            return delay
        self._count_eviction(200)
        self._refusals.pop(pod.uid, None)
        self._left(pod, claim_raw)
        log.info("evicted pod", pod=pod.key)
        await self.recorder.publish(
            codec.pod_reference(pod), events.NORMAL, "Evicted", f"Evicted pod: {_reason(claim_raw)}"
        )
        return DRAIN_POLL_S

    async def _evict_or_delete(self, pod: Pod) -> None:
        try:
            await self.kube.evict(pod.namespace, pod.name, pod.uid)
        except errors.NamespaceTerminating as err:
            # No eviction can be created in a namespace being deleted, and the namespace
            # controller is deleting its pods anyway: delete this one now, as upstream does.
            self._count_eviction(err.status)
            await self.kube.delete(PODS, pod.name, pod.namespace, uid=pod.uid)

    async def _refused(
        self, pod: Pod, err: errors.ApiError, raw: Obj, claim_raw: Obj | None, log: Any
    ) -> None:
        if isinstance(err, errors.TooManyRequests):
            why = f"evicting pod {pod.key} violates a PDB"
        elif isinstance(err, errors.MultiplePDBs):
            why = f"eviction of pod {pod.key} does not support multiple PDBs"
        else:
            log.warning("eviction failed", pod=pod.key, error=str(err))
            return
        message = f"Failed to drain node, {why}"
        for involved in (raw, claim_raw):
            if involved is not None:
                await self.recorder.publish(
                    codec.object_reference(involved), events.WARNING, "FailedDraining", message
                )

    async def _force_delete(
        self, delete: term.ForceDelete, deadline: float, raw: Obj, claim_raw: Obj | None, log: Any
    ) -> None:
        pod = delete.pod
        try:
            await self.kube.delete(
                PODS, pod.name, pod.namespace, grace_period_s=delete.grace_s, uid=pod.uid
            )
        except (errors.NotFound, errors.Conflict):
            return
        if not pod.deleting:  # a second delete only shortens the grace; count the pod once
            self._left(pod, claim_raw)
        log.info("deleted pod for the termination grace period", pod=pod.key, grace=delete.grace_s)
        message = (
            f"Deleting the pod to accommodate the terminationTime {codec.rfc3339(deadline)} of "
            f"the node. The pod was granted {delete.grace_s} seconds of grace-period of its "
            f"{pod.termination_grace_seconds} terminationGracePeriodSeconds. This bypasses the "
            "PDB of the pod and the do-not-disrupt annotation."
        )
        await self.recorder.publish(codec.pod_reference(pod), events.NORMAL, "Disrupted", message)

    def _left(self, pod: Pod, claim_raw: Obj | None) -> None:
        self.drained_pods.append(pod.key)
        self.metrics.pods_drained.labels(reason=_reason(claim_raw)).inc()

    def _count_eviction(self, code: int) -> None:
        self.metrics.pods_eviction_requests.labels(code=str(code)).inc()

    # ---- volumes --------------------------------------------------------------------------------

    async def _await_volumes(
        self, raw: Obj, claim_raw: Obj | None, deadline: float | None
    ) -> float | None:
        """None once no VolumeAttachment of a drained pod's volume is left on the Node."""
        name, now = codec.name(raw), self.clock.now()
        if deadline is not None and now >= deadline:
            await self._condition(
                claim_raw, "VolumesDetached", "False", "TerminationGracePeriodElapsed"
            )
            return None
        items, _ = await self.kube.list(VOLUMEATTACHMENTS)
        attachments = [
            (codec.name(va), str(((va.get("spec") or {}).get("source") or {}).get(_PV) or ""))
            for va in items
            if (va.get("spec") or {}).get("nodeName") == name
        ]
        kept = await self._kept_volumes(name, now) if attachments else set()
        blocking = term.volumes_blocking(attachments, kept)
        if not blocking:
            await self._condition(claim_raw, "VolumesDetached", "True", "VolumesDetached")
            return None
        await self._condition(claim_raw, "VolumesDetached", "Unknown", "AwaitingVolumeDetachment")
        await self.recorder.publish(
            codec.object_reference(raw),
            events.NORMAL,
            "AwaitingVolumeDetachment",
            f"Awaiting deletion of bound volumeattachments ({', '.join(blocking)})",
        )
        return DRAIN_POLL_S

    async def _kept_volumes(self, node: str, now: float) -> set[str]:
        """PVs of the pods that stay to the end (not drained): their volumes never detach first."""
        kept: set[str] = set()
        for pod in self.state.pods_on(node):
            if term.drainable(pod, now) or pod.is_terminal():
                continue
            for claim in pod.pvc_names:
                try:
                    pvc = await self.kube.get(PVCS, claim, pod.namespace)
                except errors.NotFound:
                    continue
                volume = str((pvc.get("spec") or {}).get("volumeName") or "")
                if volume:
                    kept.add(volume)
        return kept

    # ---- instance and finalizer -----------------------------------------------------------------

    def _claim_model(self, raw: Obj, claim_raw: Obj | None) -> NodeClaim:
        claim = self.state.nodeclaims.get(codec.name(claim_raw)) if claim_raw else None
        if claim is not None:
            return claim
        provider_id = str((raw.get("spec") or {}).get("providerID") or "")
        return NodeClaim(name=codec.name(raw), provider_id=provider_id)

    async def _instance_gone(self, raw: Obj) -> bool:
        provider_id = str((raw.get("spec") or {}).get("providerID") or "")
        if not provider_id:
            return False
        try:
            await self.cloud.get(provider_id)
        except NodeClaimNotFoundError:
            return True
        return False

    async def _terminate_instance(self, raw: Obj, claim_raw: Obj | None, log: Any) -> bool:
        """Ask the cloud to terminate; True once it reports the instance gone."""
        try:
            await self.cloud.delete(self._claim_model(raw, claim_raw))
        except NodeClaimNotFoundError:
            return True
        await self._condition(claim_raw, "InstanceTerminating", "True", "InstanceTerminating")
        log.info("instance terminating")
        return False

    async def _finalize(self, raw: Obj, log: Any) -> None:
        name = codec.name(raw)
        current = self.state.nodes.raw(name) or raw  # our own taint patch moved the version
        meta = codec.meta(current)
        finalizers = [f for f in meta.get("finalizers") or [] if f != lbl.FINALIZER_TERMINATION]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        try:
            await self.kube.merge_patch(NODES, name, patch)
        except errors.NotFound:
            return
        labels = meta.get("labels") or {}
        nodepool = labels.get(lbl.NODEPOOL, "")
        self.metrics.nodes_terminated.labels(nodepool=nodepool, zone=labels.get(lbl.ZONE, "")).inc()
        deleted = codec.parse_time(meta.get("deletionTimestamp"))
        if deleted is not None:
            self.metrics.nodes_termination_duration.labels(nodepool=nodepool).observe(
                max(self.clock.now() - deleted, 0.0)
            )
        self._since.pop(name, None)
        live = {p.uid for p in self.state.pods.values()}
        self._refusals = {uid: r for uid, r in self._refusals.items() if uid in live}
        self.finalized.append(name)
        log.info("finalized")


_PV = "persistentVolumeName"


def _drain_started(claim_raw: Obj | None) -> float | None:
    """When ``Drained`` went Unknown (a restart resumes the minimum drain time from there)."""
    cond = codec.condition(claim_raw, "Drained") if claim_raw else None
    if cond is None or cond.get("status") != "Unknown":
        return None
    return codec.parse_time(cond.get("lastTransitionTime"))


def _reason(claim_raw: Obj | None) -> str:
    """The NodeClaim's disruption reason (upstream's label for drained pods)."""
    cond = codec.condition(claim_raw, "DisruptionReason") if claim_raw else None
    if cond is not None and cond.get("status") == "True" and cond.get("reason"):
        return str(cond["reason"])
    return FORCEFUL
