"""Request batching: merge concurrent calls into one AWS call inside idle/max windows.

The first caller of a bucket leads: it waits until the bucket has been idle for ``idle``
seconds, or ``max_wait`` passed since it opened, or it holds ``max_items``; then it runs the
batch and hands each caller its own result. No background task: the leader is a caller, so
the batch lives exactly as long as the calls waiting on it (structured concurrency).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

Req = TypeVar("Req")
Res = TypeVar("Res")


@dataclass(eq=False)
class _Window(Generic[Req, Res]):
    opened: float
    last: float
    items: list[Req] = field(default_factory=list)
    results: list[Res | BaseException] = field(default_factory=list)
    full: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)


class Batcher(Generic[Req, Res]):
    """Batches ``Req`` values by ``key``; ``execute`` returns one result (or error) per item."""

    def __init__(
        self,
        execute: Callable[[Sequence[Req]], Awaitable[Sequence[Res | BaseException]]],
        idle: float,
        max_wait: float,
        max_items: int,
        key: Callable[[Req], Hashable] = lambda _: None,
    ) -> None:
        self._execute = execute
        self._idle = idle
        self._max_wait = max_wait
        self._max_items = max_items
        self._key = key
        self._open: dict[Hashable, _Window[Req, Res]] = {}
        # told (batch size, seconds the window was open) as each batch runs: metrics
        self.on_batch: Callable[[int, float], None] | None = None

    async def submit(self, item: Req) -> Res:
        """Add ``item`` to its bucket's window and wait for its result."""
        key = self._key(item)
        now = anyio.current_time()
        window = self._open.get(key)
        leader = window is None
        if window is None:
            window = _Window(now, now)
            self._open[key] = window
        index = len(window.items)
        window.items.append(item)
        window.last = now
        if len(window.items) >= self._max_items:
            self._open.pop(key, None)  # later callers open a new window
            window.full.set()
        if leader:
            try:
                await self._lead(key, window)
            except BaseException:
                self._abandon(key, window)
                raise
        else:
            await window.done.wait()
        result = window.results[index]
        if isinstance(result, BaseException):
            raise result
        return result

    def _abandon(self, key: Hashable, window: _Window[Req, Res]) -> None:
        # the leader was cancelled before the batch ran: release the followers with an error
        # (they may retry) instead of leaving them waiting for a batch nobody will run
        if window.done.is_set():
            return
        if self._open.get(key) is window:
            del self._open[key]
        error = RuntimeError("batch abandoned: the caller leading it was cancelled")
        window.results = [error] * len(window.items)
        window.done.set()

    async def _lead(self, key: Hashable, window: _Window[Req, Res]) -> None:
        while not window.full.is_set():
            now = anyio.current_time()
            wait = min(window.last + self._idle, window.opened + self._max_wait) - now
            if wait <= 0:
                break
            with anyio.move_on_after(wait):
                await window.full.wait()
        if self._open.get(key) is window:
            del self._open[key]
        if self.on_batch is not None:
            self.on_batch(len(window.items), anyio.current_time() - window.opened)
        try:
            window.results = list(await self._execute(window.items))
        except Exception as err:  # an API error fans out to every caller, as upstream
            window.results = [err] * len(window.items)
        finally:
            window.done.set()
