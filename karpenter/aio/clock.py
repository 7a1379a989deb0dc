"""Clock: the one place the shell reads wall time or sleeps, so tests can drive time by hand.

Everything outside this module takes a ``Clock``. ``RealClock`` is the process clock;
``FakeClock`` only moves when a test calls ``advance`` and then wakes, in deadline order, every
sleeper whose deadline has passed. Nothing here is a global: the operator builds one clock and
passes it down.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.lowlevel


class Clock(Protocol):
    """Wall time in unix seconds, and a sleep measured against that same time."""

    def now(self) -> float:
        """Seconds since the unix epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed on this clock (at once when ``seconds <= 0``)."""
        ...


class RealClock:
    """The process clock: ``time.time`` and ``anyio.sleep``."""

    def now(self) -> float:
        """Seconds since the unix epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep on the event loop's timer."""
        await anyio.sleep(max(seconds, 0.0))


@dataclass(order=True)
class _Sleeper:
    deadline: float
    seq: int  # ties on the deadline wake in the order the sleeps began
    event: anyio.Event = field(compare=False)


class FakeClock:
    """A clock that stands still until ``advance`` moves it; sleepers wake deterministically."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._seq = 0
        self._sleepers: list[_Sleeper] = []
        self._slept = anyio.Event()  # set (and replaced) each time a task starts sleeping

    def now(self) -> float:
        """The time the test has advanced to."""
        return self._now

    @property
    def sleepers(self) -> int:
        """How many tasks are blocked in ``sleep`` right now."""
        return len(self._sleepers)

    @property
    def next_deadline(self) -> float | None:
        """When the earliest sleeper is due, or None when nobody sleeps."""
        return min(self._sleepers).deadline if self._sleepers else None

    async def sleep(self, seconds: float) -> None:
        """Block until ``advance`` has moved the clock ``seconds`` past now."""
        if seconds <= 0:
            # still a checkpoint, so a zero sleep yields and honours cancellation like anyio's
            await anyio.lowlevel.checkpoint()
            return
        self._seq += 1
        sleeper = _Sleeper(self._now + seconds, self._seq, anyio.Event())
        self._sleepers.append(sleeper)
        self._slept.set()
        self._slept = anyio.Event()
        try:
            await sleeper.event.wait()
        finally:
            # a cancelled sleeper must not linger and be counted (or woken) later
            if sleeper in self._sleepers:
                self._sleepers.remove(sleeper)

    async def block_until(self, sleepers: int) -> None:
        """Return once at least ``sleepers`` tasks are blocked in ``sleep``.

        Tests call this after ``advance`` to know the code under test has finished reacting
        (done its I/O and gone back to sleep) before they look at the outcome.
        """
        while len(self._sleepers) < sleepers:
            await self._slept.wait()

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline is now past, earliest first."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance({seconds}))")
        self._now += seconds
        due = sorted(s for s in self._sleepers if s.deadline <= self._now)
        for sleeper in due:
            self._sleepers.remove(sleeper)
            sleeper.event.set()
