"""Keyed queue: one reconcile per key at a time, re-runs after mid-flight adds, delayed requeues."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from karpenter.aio.clock import FakeClock
from karpenter.aio.keyed_queue import KeyedQueue


async def _settle() -> None:
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


@pytest.mark.asyncio
async def test_duplicate_adds_collapse_and_requeue_after_waits_for_the_clock() -> None:
    """Three adds of one key reconcile once; a returned delay reruns it only after that time."""
    clock = FakeClock()
    queue: KeyedQueue[str] = KeyedQueue(clock)
    calls: list[tuple[str, float]] = []

    async def worker(key: str) -> float | None:
        calls.append((key, clock.now()))
        return 5.0 if len(calls) == 1 else None

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            queue.add("a")
        tg.start_soon(queue.run, worker)
        await _settle()
        assert calls == [("a", 0.0)]
        clock.advance(4.9)
        await _settle()
        assert len(calls) == 1
        clock.advance(0.1)
        await _settle()
        assert calls == [("a", 0.0), ("a", 5.0)]
        tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_add_during_reconcile_runs_again_never_concurrently() -> None:
    """A key added while its reconcile runs is reconciled once more, after it finishes."""
    clock = FakeClock()
    queue: KeyedQueue[str] = KeyedQueue(clock)
    release = anyio.Event()
    running = 0
    peak = 0
    calls = 0

    async def worker(key: str) -> float | None:
        nonlocal running, peak, calls
        running += 1
        peak = max(peak, running)
        calls += 1
        if calls == 1:
            await release.wait()
        running -= 1
        return None

    async with anyio.create_task_group() as tg:
        queue.add("a")
        tg.start_soon(queue.run, worker)
        await _settle()
        queue.add("a")
        await _settle()
        assert calls == 1
        release.set()
        await _settle()
        assert calls == 2
        assert peak == 1
        tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_failures_back_off_exponentially() -> None:
    """A raising worker is retried after 0.5 s, then 1 s."""
    clock = FakeClock()
    queue: KeyedQueue[str] = KeyedQueue(clock)
    calls: list[float] = []

    async def worker(key: str) -> float | None:
        calls.append(clock.now())
        raise RuntimeError("boom")

    async with anyio.create_task_group() as tg:
        queue.add("a")
        tg.start_soon(queue.run, worker)
        await _settle()
        clock.advance(0.5)
        await _settle()
        clock.advance(1.0)
        await _settle()
        assert calls == [0.0, 0.5, 1.5]
        tg.cancel_scope.cancel()
