"""``status.lastPodEventTime``: when a pod last arrived on, or began leaving, a NodeClaim's node.

Consolidation waits ``consolidateAfter`` from this moment, so a node that just received or lost
work is not judged yet. The events that count, as upstream counts them: a non-DaemonSet pod's
``PodScheduled`` condition turning True (its transition time), or a pod on the node going
terminal or starting to terminate (now). Each pod's last seen signature is kept so that an
unrelated update of the same pod (a label, a readiness flip) writes nothing; per NodeClaim the
latest pending time wins and is written once, and never moves the stored time backwards.

Writes to one NodeClaim are at least ``DEDUPE_S`` (10 s, upstream's dedupe) apart: a node
filling during a burst gets one write, then the latest time ``DEDUPE_S`` later, not one write
per bind. Unlike upstream, which drops the events inside the window, the latest time is still
written at the window's end, so the stored time ends exact.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc

from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS, Obj

DEDUPE_S = 10.0

# (nodeName, PodScheduled=True transition time, terminal, terminating)
Signature = tuple[str, float | None, bool, bool]


def _signature(pod: Obj) -> Signature:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    scheduled = codec.condition(pod, "PodScheduled")
    when = None
    if scheduled is not None and scheduled.get("status") == "True":
        when = codec.parse_time(scheduled.get("lastTransitionTime"))
    return (
        str(spec.get("nodeName") or ""),
        when,
        status.get("phase") in ("Succeeded", "Failed"),
        bool(codec.meta(pod).get("deletionTimestamp")),
    )


def _daemon(pod: Obj) -> bool:
    owners = codec.meta(pod).get("ownerReferences") or []
    return any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners)


class PodEvents(Controller):
    """Keeps every managed NodeClaim's ``lastPodEventTime`` current."""

    def __init__(self, ctx: ControllerContext, *, concurrency: int = 10) -> None:
        super().__init__(ctx, "nodeclaim.podevents")
        self.concurrency = concurrency
        self.queue: KeyedQueue[str] = KeyedQueue(self.clock, "nodeclaim.podevents")
        self.pending: dict[str, float] = {}  # NodeClaim → latest event time not yet written
        self._seen: dict[str, Signature] = {}
        self._node_of_claim: dict[str, str] = {}  # to notice a claim newly naming its Node
        self._written: dict[str, float] = {}  # NodeClaim → when (clock) it was last written
        self.writes = 0  # status writes made (logs and tests)
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "NodeClaim":
            self._index(key, obj)
        elif kind == "Pod":
            self._pod(key, obj)

    def _index(self, claim: str, obj: Obj | None) -> None:
        old = self._node_of_claim.pop(claim, "")
        if obj is None:
            self._written.pop(claim, None)
        node = str(((obj or {}).get("status") or {}).get("nodeName") or "")
        if obj is not None and node:
            self._node_of_claim[claim] = node
            if node != old:
                self._catch_up(claim, node)

    def _catch_up(self, claim: str, node: str) -> None:
        """Pods seen on the node before its claim was known (informers replay in any order)."""
        times = [
            self._seen[p][1]
            for p in self.state.pod_keys_on(node)
            if p in self._seen and self._seen[p][1] is not None
        ]
        latest = max((t for t in times if t is not None), default=None)
        if latest is not None:
            self.pending[claim] = max(self.pending.get(claim, latest), latest)
            self.queue.add(claim)

    def _pod(self, key: str, pod: Obj | None) -> None:
        old = self._seen.pop(key, None)
        if pod is None or _daemon(pod):
            return
        new = _signature(pod)
        self._seen[key] = new
        node, scheduled, terminal, terminating = new
        if not node or new == old:
            return
        when: float | None = None
        if (terminal and not (old and old[2])) or (terminating and not (old and old[3])):
            when = self.clock.now()
        elif scheduled is not None and (old is None or old[1] != scheduled):
            when = scheduled
        claims = self.state.claims_of_node(node)
        if when is None or not claims:
            return
        claim = claims[0]
        self.pending[claim] = max(self.pending.get(claim, when), when)
        self.queue.add(claim)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Write pending event times forever."""
        task_status.started()
        await self.queue.run(self.reconcile, self.concurrency)

    async def reconcile(self, claim: str) -> float | None:
        """Write the claim's pending time unless the stored one is as late."""
        when = self.pending.pop(claim, None)
        current = self.state.nodeclaims.get(claim)
        raw = self.state.nodeclaims.raw(claim)
        if when is None or current is None or raw is None or current.deleting:
            return None
        if current.last_pod_event is not None and current.last_pod_event >= when:
            return None
        now = self.clock.now()
        last = self._written.get(claim)
        if last is not None and now - last < DEDUPE_S:
            self.pending[claim] = max(self.pending.get(claim, when), when)
            return last + DEDUPE_S - now  # the latest time, written when the window ends
        patch: dict[str, Any] = {"status": {"lastPodEventTime": codec.rfc3339(when)}}
        try:
            obj = await self.kube.merge_patch(NODECLAIMS, claim, patch, subresource="status")
        except errors.NotFound:
            return None
        except errors.ApiError:
            # keep the time for the retry the queue schedules
            self.pending[claim] = max(self.pending.get(claim, when), when)
            raise
        self._written[claim] = now
        self.writes += 1
        self.state.nodeclaims.upsert(obj)
        self._log.debug("last pod event", nodeclaim=claim, time=codec.rfc3339(when))
        return None
