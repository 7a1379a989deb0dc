"""Clock: the fake clock wakes sleepers only when advanced past their deadline, in order."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from karpenter.aio import clock as clock_mod
from karpenter.aio.clock import Clock, FakeClock, RealClock


async def _settle() -> None:
    # let woken tasks run; a handful of checkpoints is plenty for one hop each
    for _ in range(5):
        await anyio.lowlevel.checkpoint()


async def _until_sleeping(clock: FakeClock, count: int) -> None:
    with anyio.fail_after(1):
        await clock.block_until(count)


def test_real_clock_reads_unix_time() -> None:
    """RealClock.now is unix seconds (well after 2020)."""
    real: Clock = RealClock()
    assert real.now() > 1_577_836_800


@pytest.mark.asyncio
async def test_real_clock_sleeps() -> None:
    """RealClock.sleep really waits, and a negative sleep returns at once."""
    real = RealClock()
    before = anyio.current_time()
    await real.sleep(0.02)
    await real.sleep(-1)
    assert anyio.current_time() - before >= 0.02


def test_fake_clock_starts_where_told_and_advances() -> None:
    """FakeClock.now is the start time plus every advance."""
    fake = FakeClock(start=1000.0)
    fake.advance(2.5)
    fake.advance(0)
    assert fake.now() == 1002.5
    with pytest.raises(ValueError, match="backwards"):
        fake.advance(-1)


@pytest.mark.asyncio
async def test_sleeper_wakes_only_after_deadline() -> None:
    """A sleep of 10s stays blocked at +9.9s and returns once the clock reaches +10s."""
    fake = FakeClock(start=100.0)
    woke: list[float] = []

    async def sleeper() -> None:
        await fake.sleep(10)
        woke.append(fake.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        await _until_sleeping(fake, 1)
        assert fake.next_deadline == 110.0
        fake.advance(9.9)
        await _settle()
        assert woke == []
        fake.advance(0.1)
    assert woke == [110.0]
    assert fake.sleepers == 0


@pytest.mark.asyncio
async def test_sleepers_wake_in_deadline_order() -> None:
    """One big advance wakes all due sleepers earliest deadline first, ties in start order."""
    fake = FakeClock()
    order: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await fake.sleep(seconds)
        order.append(name)

    async with anyio.create_task_group() as tg:
        plan = (("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("late", 9.0))
        for started, (name, seconds) in enumerate(plan, start=1):
            # wait for each to block so the start order (the tie-break) is the plan's order
            tg.start_soon(sleeper, name, seconds)
            await _until_sleeping(fake, started)
        fake.advance(5)
        await _settle()
        assert order == ["a", "b1", "b2", "c"]
        assert fake.sleepers == 1
        fake.advance(4)
    assert order == ["a", "b1", "b2", "c", "late"]


@pytest.mark.asyncio
async def test_zero_sleep_is_a_checkpoint() -> None:
    """A zero or negative fake sleep returns without advancing and without registering."""
    fake = FakeClock()
    await fake.sleep(0)
    await fake.sleep(-3)
    assert (fake.now(), fake.sleepers) == (0.0, 0)


@pytest.mark.asyncio
async def test_cancelled_sleeper_is_forgotten() -> None:
    """A cancelled sleep stops counting as a sleeper and is never woken later."""
    fake = FakeClock()
    async with anyio.create_task_group() as tg:
        tg.start_soon(fake.sleep, 5.0)
        await _until_sleeping(fake, 1)
        tg.cancel_scope.cancel()
    assert fake.sleepers == 0
    assert fake.next_deadline is None
    fake.advance(10)


def test_protocol_is_satisfied() -> None:
    """Both clocks satisfy the Clock protocol (checked by mypy via these annotations)."""
    clocks: list[clock_mod.Clock] = [RealClock(), FakeClock(0)]
    assert len(clocks) == 2


@pytest.mark.asyncio
async def test_block_until_waits_for_sleepers() -> None:
    """block_until returns only once the requested number of tasks sleep on the clock."""
    fake = FakeClock()
    seen: list[int] = []

    async def watcher() -> None:
        await fake.block_until(2)
        seen.append(fake.sleepers)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher)
        tg.start_soon(fake.sleep, 1.0)
        await _settle()
        assert seen == []
        tg.start_soon(fake.sleep, 2.0)
        await _settle()
        assert seen == [2]
        await fake.block_until(0)  # already true: returns at once
        fake.advance(2)
