"""Kubernetes Events: what Karpenter tells users on their objects (``kubectl describe``).

Events are core/v1 Events from component ``karpenter``. Like upstream's recorder, an identical
event (same object, reason and message) is not posted again within the dedupe window (2 min
by default; FailedScheduling uses 5 min), so a pod retried every pass does not flood the
apiserver. Failing to post an Event never fails the caller: it is logged and dropped.

High-volume callers (the provisioner's Nominated events, one per pod per pass) publish with
``background=True``: while ``run`` is running the Event is queued and posted by its workers
under the recorder's own rate limit (``EVENT_QPS``), as client-go's broadcaster posts
asynchronously through an events client of its own — so Events neither hold up a
provisioning pass nor spend the controller's KUBE_CLIENT_QPS. A full queue drops the Event.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
import anyio
import anyio.abc
import structlog

from karpenter.aio.clock import Clock
from karpenter.aio.ratelimit import TokenBucket
from karpenter.kube import codec, errors
from karpenter.kube.client import EVENTS, KubeClient, Obj

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

NORMAL = "Normal"
WARNING = "Warning"
COMPONENT = "karpenter"
DEFAULT_DEDUPE_S = 120.0
EVENT_QPS, EVENT_BURST = 50.0, 100
QUEUE = 5000
WORKERS = 8


class EventRecorder:
    """Posts Events, deduplicated per (object uid, reason, message)."""

    def __init__(self, client: KubeClient, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self._recent: dict[tuple[str, str, str], float] = {}
        self._queue: MemoryObjectSendStream[tuple[Obj, str]] | None = None
        self.dropped = 0  # background Events lost to a full queue
        self._log = structlog.get_logger()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Post background Events until cancelled."""
        send, receive = anyio.create_memory_object_stream[tuple[Obj, str]](QUEUE)
        limiter = TokenBucket(self.clock, EVENT_QPS, EVENT_BURST)
        async with send, receive, anyio.create_task_group() as tg:
            for _ in range(WORKERS):
                tg.start_soon(self._worker, receive.clone(), limiter)
            self._queue = send
            try:
                task_status.started()
                await anyio.sleep_forever()
            finally:
                self._queue = None

    async def _worker(
        self, receive: MemoryObjectReceiveStream[tuple[Obj, str]], limiter: TokenBucket
    ) -> None:
        async with receive:
            async for body, namespace in receive:
                await limiter.acquire()
                await self._post(body, namespace, throttle=False)

    async def publish(
        self,
        involved: Mapping[str, Any],
        event_type: str,
        reason: str,
        message: str,
        *,
        dedupe_s: float = DEFAULT_DEDUPE_S,
        background: bool = False,
        sample: TokenBucket | None = None,
    ) -> bool:
        """Post one Event about ``involved`` (an ObjectReference); False when deduplicated
        or, with ``sample``, when that limiter has no token now (the Event is dropped, as
        upstream's per-kind rate limiters drop theirs).

        ``background``: queue it for ``run``'s workers (posted inline when ``run`` is not
        running) and return at once."""
        now = self.clock.now()
        key = (str(involved.get("uid") or involved.get("name")), reason, message)
        last = self._recent.get(key)
        if last is not None and now - last < dedupe_s:
            return False
        self._recent[key] = now
        if len(self._recent) > 10_000:
            self._recent = {k: t for k, t in self._recent.items() if now - t < dedupe_s}
        if sample is not None and not sample.try_acquire():
            return False
        namespace = str(involved.get("namespace") or "default")
        stamp = codec.rfc3339(now)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.get('name', 'object')}.{secrets.token_hex(8)}",
                "namespace": namespace,
            },
            "involvedObject": dict(involved),
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if background and self._queue is not None:
            try:
                self._queue.send_nowait((body, namespace))
            except anyio.WouldBlock:
                self.dropped += 1
                return False
            return True
        return await self._post(body, namespace)

    async def _post(self, body: Obj, namespace: str, *, throttle: bool = True) -> bool:
        try:
            await self.client.create(EVENTS, body, namespace, throttle=throttle)
        except (errors.ApiError, aiohttp.ClientError, OSError) as err:
            self._log.warning("event not posted", reason=body["reason"], error=str(err))
            return False
        return True
