"""The batcher: gather triggers into one window so one solve sees many pods at once.

A window opens at the first trigger and closes when ``idle`` seconds pass without a new
trigger or ``max`` seconds after it opened, whichever comes first (upstream's
BATCH_IDLE_DURATION 1 s / BATCH_MAX_DURATION 10 s). Triggers are deduplicated by key. A new
trigger can only push the idle deadline later, never earlier, so the waiter simply sleeps to
the current deadline and re-reads it; no wake-up race is possible.

An optional ``hold`` is asked when the idle deadline has passed: it names a time the window
should stay open until (work known to be on its way, not triggered yet), or None. A hold never
reaches past the max duration, so a window still closes at most ``max`` after it opened.

A trigger may say when its work arrived (``at``, in the past): the idle gap counts from the
latest arrival, not from when the caller got round to triggering. A caller that learns of work
late (a pod is provisioned early only once it has waited a second for the kube-scheduler) would
otherwise add its own delay to every window.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import anyio

from karpenter.aio.clock import Clock

K = TypeVar("K", bound=Hashable)


class Batcher(Generic[K]):
    """Collects keys; ``wait`` returns one window's worth."""

    def __init__(
        self,
        clock: Clock,
        idle_s: float,
        max_s: float,
        hold: Callable[[], float | None] | None = None,
    ) -> None:
        self.clock = clock
        self.idle_s = idle_s
        self.max_s = max_s
        self.hold = hold
        self._keys: set[K] = set()
        self._last = 0.0
        self._armed = anyio.Event()
        self.last_window_s = 0.0  # how long the last window stayed open (for the pass log)

    def trigger(self, key: K, at: float | None = None) -> None:
        """Add ``key`` to the open window (opening one if none is); ``at``: when its work
        arrived, if earlier than now."""
        if key in self._keys:
            # a repeated trigger (a resync of the same pod) is not new work: it must not keep
            # an otherwise idle window open
            return
        now = self.clock.now()
        stamp = now if at is None else min(at, now)
        self._last = max(self._last, stamp) if self._keys else stamp
        self._keys.add(key)
        self._armed.set()

    @property
    def pending(self) -> int:
        """Keys in the open window."""
        return len(self._keys)

    @property
    def keys(self) -> frozenset[K]:
        """The open window's keys."""
        return frozenset(self._keys)

    async def wait(self) -> set[K]:
        """Block until a window has opened and closed; return its keys."""
        await self._armed.wait()
        opened = self.clock.now()
        closes = opened + self.max_s
        while True:
            now = self.clock.now()
            deadline = min(self._last + self.idle_s, closes)
            if deadline <= now < closes and self.hold is not None:
                until = self.hold()
                if until is not None:
                    deadline = min(until, closes)
            remaining = deadline - now
            if remaining <= 0:
                break
            await self.clock.sleep(remaining)
        keys, self._keys = self._keys, set()
        self._armed = anyio.Event()
        self.last_window_s = self.clock.now() - opened
        return keys
