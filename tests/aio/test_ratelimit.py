"""Token bucket: a full burst passes at once, then one token per 1/rate seconds."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from karpenter.aio.clock import FakeClock
from karpenter.aio.ratelimit import TokenBucket


async def _settle() -> None:
    for _ in range(10):
        await anyio.lowlevel.checkpoint()


@pytest.mark.asyncio
async def test_burst_then_rate() -> None:
    """Burst 2 at rate 10/s: two pass now, the third waits 0.1 s, the fourth 0.2 s."""
    clock = FakeClock()
    bucket = TokenBucket(clock, rate=10, burst=2)
    done: list[float] = []

    async def take() -> None:
        await bucket.acquire()
        done.append(clock.now())

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(take)
        await _settle()
        assert done == [0.0, 0.0]
        clock.advance(0.1)
        await _settle()
        assert done == [0.0, 0.0, 0.1]
        clock.advance(0.1)
    assert done == [0.0, 0.0, 0.1, 0.2]


@pytest.mark.asyncio
async def test_a_reservation_is_one_place_in_line() -> None:
    """Rate 10/s, burst 1: a reservation of 3 made first is due at 0.2 s as a whole, and a
    single token asked for after it waits behind all three (0.3 s), not between them."""
    clock = FakeClock()
    bucket = TokenBucket(clock, rate=10, burst=1)
    done: list[tuple[str, float]] = []

    async def take(who: str, n: int) -> None:
        await bucket.acquire(n)
        done.append((who, clock.now()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "three", 3)
        await _settle()
        tg.start_soon(take, "one", 1)
        await _settle()
        for _ in range(3):
            clock.advance(0.1)
            await _settle()
    assert [(who, round(at, 6)) for who, at in done] == [("three", 0.2), ("one", 0.3)]
    with pytest.raises(ValueError, match="positive"):
        await bucket.acquire(0)


def test_try_acquire_never_waits() -> None:
    """Burst 2 at rate 10/s: two tries take a token, the third finds none; 0.1 s later one."""
    clock = FakeClock()
    bucket = TokenBucket(clock, rate=10, burst=2)
    assert [bucket.try_acquire() for _ in range(3)] == [True, True, False]
    clock.advance(0.1)
    assert [bucket.try_acquire() for _ in range(2)] == [True, False]


def test_invalid_rates_are_refused() -> None:
    """A zero rate or burst is a configuration error."""
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(FakeClock(), rate=0, burst=1)
