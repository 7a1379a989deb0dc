"""Batcher: a window closes after the idle gap or the max duration, on an injected clock."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from karpenter.aio.batcher import Batcher
from karpenter.aio.clock import FakeClock


async def _until_sleeping(clock: FakeClock) -> None:
    with anyio.fail_after(1):
        while clock.sleepers < 1:
            await anyio.lowlevel.checkpoint()


async def _settle() -> None:
    for _ in range(5):
        await anyio.lowlevel.checkpoint()


@pytest.mark.asyncio
async def test_window_closes_after_idle_gap() -> None:
    """One trigger and nothing else: the window closes exactly one idle duration later."""
    clock = FakeClock(start=0.0)
    batcher: Batcher[str] = Batcher(clock, idle_s=1.0, max_s=10.0)
    got: list[set[str]] = []

    async def waiter() -> None:
        got.append(await batcher.wait())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        batcher.trigger("a")
        await _until_sleeping(clock)
        clock.advance(0.9)
        await _settle()
        assert got == []
        clock.advance(0.1)
    assert got == [{"a"}]


@pytest.mark.asyncio
async def test_triggers_extend_the_window_up_to_max() -> None:
    """A trigger every 0.5 s keeps the window open until the max duration, then it closes."""
    clock = FakeClock(start=0.0)
    batcher: Batcher[int] = Batcher(clock, idle_s=1.0, max_s=3.0)
    got: list[set[int]] = []

    async def waiter() -> None:
        got.append(await batcher.wait())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        batcher.trigger(0)
        for i in range(1, 6):
            await _until_sleeping(clock)
            clock.advance(0.5)
            await _settle()
            batcher.trigger(i)
        assert got == []  # 2.5 s in, triggers keep it open
        await _until_sleeping(clock)
        clock.advance(0.5)
    assert got == [{0, 1, 2, 3, 4, 5}]
    assert batcher.pending == 0


@pytest.mark.asyncio
async def test_duplicate_trigger_does_not_extend_window() -> None:
    """Re-triggering a key already in the window does not push the idle deadline."""
    clock = FakeClock(start=0.0)
    batcher: Batcher[str] = Batcher(clock, idle_s=1.0, max_s=10.0)
    got: list[set[str]] = []

    async def waiter() -> None:
        got.append(await batcher.wait())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        batcher.trigger("a")
        await _until_sleeping(clock)
        clock.advance(0.6)
        await _settle()
        batcher.trigger("a")
        clock.advance(0.4)
    assert got == [{"a"}]


@pytest.mark.asyncio
async def test_next_window_starts_empty() -> None:
    """After a window is returned, the next wait blocks until a new trigger."""
    clock = FakeClock(start=0.0)
    batcher: Batcher[str] = Batcher(clock, idle_s=1.0, max_s=10.0)
    batcher.trigger("a")
    clock.advance(1.0)
    assert await batcher.wait() == {"a"}
    with anyio.move_on_after(0.05) as scope:
        await batcher.wait()
    assert scope.cancelled_caught


@pytest.mark.asyncio
async def test_hold_keeps_the_window_open_until_its_time_never_past_max() -> None:
    """Past the idle gap the window waits for the hold's time, then closes; a hold reaching
    beyond the max duration is cut at it."""
    clock = FakeClock(start=0.0)
    holds: list[float | None] = [2.5, None, 50.0]
    asked: list[float] = []

    def hold() -> float | None:
        asked.append(clock.now())
        return holds.pop(0)

    batcher: Batcher[str] = Batcher(clock, idle_s=1.0, max_s=10.0, hold=hold)
    got: list[tuple[float, set[str]]] = []

    async def waiter() -> None:
        keys = await batcher.wait()
        got.append((clock.now(), keys))
        keys = await batcher.wait()
        got.append((clock.now(), keys))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        batcher.trigger("a")
        await _until_sleeping(clock)
        clock.advance(1.0)  # idle gap over: the hold names 2.5
        await _settle()
        assert got == [] and asked == [1.0]
        clock.advance(1.5)  # the hold's time: asked again, nothing more to wait for
        await _settle()
        assert got == [(2.5, {"a"})] and asked == [1.0, 2.5]
        batcher.trigger("b")
        await _until_sleeping(clock)
        clock.advance(1.0)  # the hold now names 50 s: cut at the max (2.5 + 10)
        await _settle()
        clock.advance(8.9)
        await _settle()
        assert len(got) == 1
        clock.advance(0.1)
    assert got[1] == (12.5, {"b"}) and asked == [1.0, 2.5, 3.5]


@pytest.mark.asyncio
async def test_idle_gap_counts_from_when_the_work_arrived() -> None:
    """A trigger stamped with an earlier arrival closes the window one idle gap after that
    arrival, not after the trigger; a later arrival in the same window extends it, an older
    one does not pull it back; a stamp in the future counts as now."""
    clock = FakeClock(start=10.0)
    batcher: Batcher[str] = Batcher(clock, idle_s=1.0, max_s=10.0)
    got: list[tuple[float, set[str]]] = []

    async def waiter() -> None:
        for _ in range(2):
            keys = await batcher.wait()
            got.append((clock.now(), keys))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        batcher.trigger("a", at=9.25)  # arrived 0.75 s ago: the gap ends at 10.25
        await _until_sleeping(clock)
        batcher.trigger("b", at=9.5)  # later arrival: 10.5
        batcher.trigger("c", at=9.0)  # older: no change
        clock.advance(0.4)
        await _settle()
        assert got == []
        clock.advance(0.1)
        await _settle()
        assert got == [(10.5, {"a", "b", "c"})] and batcher.last_window_s == 0.5
        batcher.trigger("d", at=99.0)  # a clock skew cannot stretch a window
        await _until_sleeping(clock)
        clock.advance(1.0)
    assert got[1] == (11.5, {"d"})
