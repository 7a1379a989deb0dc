"""A keyed work queue: reconcile each key at most once at a time, with delayed requeues.

The controller-runtime workqueue contract: adding a key that is already waiting is a no-op; a
key added while it is being processed runs once more afterwards (the change that caused the
add may have come after the reconcile read its input); ``add_after`` schedules a key for later,
keeping the earliest time. A worker returns how long to wait before the key's next reconcile
(None: not until something changes); an exception retries the key with exponential backoff.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import anyio
import anyio.abc
import structlog

from karpenter.aio.clock import Clock

K = TypeVar("K", bound=Hashable)
Worker = Callable[[K], Awaitable[float | None]]

_BACKOFF_START_S = 0.5
_BACKOFF_MAX_S = 60.0


class KeyedQueue(Generic[K]):
    """Dirty keys, in-flight keys and due times; ``run`` drains it with a worker."""

    def __init__(self, clock: Clock, name: str = "queue") -> None:
        self.clock = clock
        self.name = name
        self._dirty: dict[K, None] = {}  # insertion-ordered set
        self._processing: set[K] = set()
        self._again: set[K] = set()
        self._due: dict[K, float] = {}
        self._failures: dict[K, int] = {}
        self._wake = anyio.Event()
        self._log = structlog.get_logger().bind(queue=name)

    def add(self, key: K) -> None:
        """Reconcile ``key`` soon."""
        if key in self._processing:
            self._again.add(key)
        else:
            self._dirty[key] = None
        self._wake.set()

    def add_after(self, key: K, delay_s: float) -> None:
        """Reconcile ``key`` in ``delay_s`` seconds (an earlier schedule wins)."""
        if delay_s <= 0:
            self.add(key)
            return
        due = self.clock.now() + delay_s
        self._due[key] = min(self._due.get(key, due), due)
        self._wake.set()

    def __len__(self) -> int:
        return len(self._dirty) + len(self._due)

    async def run(self, worker: Worker[K], concurrency: int = 10) -> None:
        """Process keys forever with at most ``concurrency`` at once."""
        limiter = anyio.CapacityLimiter(concurrency)
        async with anyio.create_task_group() as tg:
            while True:
                self._wake = anyio.Event()
                self._promote_due()
                while self._dirty:
                    key = next(iter(self._dirty))
                    del self._dirty[key]
                    self._processing.add(key)
                    tg.start_soon(self._process, worker, key, limiter)
                await self._idle()

    def _promote_due(self) -> None:
        now = self.clock.now()
        for key, due in list(self._due.items()):
            if due <= now:
                del self._due[key]
                self.add(key)

    async def _idle(self) -> None:
        timeout = None
        if self._due:
            timeout = max(min(self._due.values()) - self.clock.now(), 0.0)
        wake = self._wake
        async with anyio.create_task_group() as tg:
            if timeout is not None:
                tg.start_soon(self._alarm, timeout, wake)
            await wake.wait()
            tg.cancel_scope.cancel()

    async def _alarm(self, delay_s: float, wake: anyio.Event) -> None:
        await self.clock.sleep(delay_s)
        wake.set()

    async def _process(self, worker: Worker[K], key: K, limiter: anyio.CapacityLimiter) -> None:
        requeue: float | None = None
        try:
            async with limiter:
                requeue = await worker(key)
            self._failures.pop(key, None)
        except Exception as err:  # one key's failure must not stop the others
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            requeue = min(_BACKOFF_START_S * 2 ** (failures - 1), _BACKOFF_MAX_S)
            self._log.warning("reconcile failed", key=str(key), error=repr(err), retry_in=requeue)
        finally:
            self._processing.discard(key)
            if key in self._again:
                self._again.discard(key)
                self.add(key)
            elif requeue is not None:
                self.add_after(key, requeue)
            self._wake.set()
