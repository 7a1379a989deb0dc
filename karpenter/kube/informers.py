"""Informers: keep a local copy of one resource in step with the apiserver by list + watch.

The loop is the client-go reflector's: list (remember the list's resourceVersion), hand the
whole set to the sink, then watch from that version with bookmarks on, so a quiet collection
still advances its version. A watch that ends normally is resumed from the last version seen;
410 Gone (the version left the watch cache, e.g. after an apiserver restart) means relist.
Any other failure backs off exponentially (0.1 s doubling to 10 s) and relists, because events
may have been missed while the connection was down. The sink sees a relist as one
``replace`` call, so it can tell deletions that happened while disconnected.

Objects reach the sink without ``metadata.managedFields`` (server-side-apply bookkeeping,
about half of a pod's JSON that nothing here reads), as upstream's informer cache strips them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import aiohttp
import anyio
import structlog

from karpenter.aio.clock import Clock
from karpenter.api.compact import strip_managed_fields
from karpenter.kube import errors
from karpenter.kube.client import KubeClient, Obj, Resource

_BACKOFF_START_S = 0.1
_BACKOFF_MAX_S = 10.0
_WATCH_TIMEOUT_S = 300


class Sink(Protocol):
    """Where an informer delivers: a full replacement, or one event."""

    def replace(self, objects: Sequence[Obj]) -> None:
        """The collection is exactly ``objects`` now."""
        ...

    def apply(self, event: str, obj: Obj) -> None:
        """``ADDED``, ``MODIFIED`` or ``DELETED`` of one object."""
        ...


class Informer:
    """List+watch one resource into a sink; ``synced`` is set after the first list."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        sink: Sink,
        clock: Clock,
        *,
        watch_timeout_s: int = _WATCH_TIMEOUT_S,
    ) -> None:
        self.client = client
        self.resource = resource
        self.sink = sink
        self.clock = clock
        self.synced = anyio.Event()
        self.relists = 0
        self._watch_timeout_s = watch_timeout_s
        self._log = structlog.get_logger().bind(informer=resource.plural)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run forever; reports started once the first list reached the sink."""
        backoff = _BACKOFF_START_S
        started = False
        while True:
            try:
                version = await self._list()
                if not started:
                    started = True
                    task_status.started()
                backoff = _BACKOFF_START_S
                await self._watch_forever(version)
            except errors.Gone:
                self._log.info("watch expired, relisting")
            except (errors.ApiError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as err:
                self._log.warning("list/watch failed", error=str(err), retry_in=backoff)
                await self.clock.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)

    async def _list(self) -> str:
        objects, version = await self.client.list(self.resource)
        for obj in objects:
            strip_managed_fields(obj)
        self.relists += 1
        self.sink.replace(objects)
        self.synced.set()
        return version

    async def _watch_forever(self, version: str) -> None:
        while True:
            async with self.client.watch(self.resource, version, self._watch_timeout_s) as events:
                async for event in events:
                    meta = event.object.get("metadata") or {}
                    version = str(meta.get("resourceVersion") or version)
                    if event.type != "BOOKMARK":
                        strip_managed_fields(event.object)
                        self.sink.apply(event.type, event.object)
