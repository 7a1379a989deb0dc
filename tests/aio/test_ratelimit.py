"""Token bucket: a full burst passes at once, then one token per 1/rate seconds; background
acquirers take only the tokens foreground ones leave, but never wait past their limit."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from karpenter.aio.clock import FakeClock
from karpenter.aio.ratelimit import BACKGROUND_MAX_WAIT_S, TokenBucket


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


@pytest.mark.asyncio
async def test_background_waits_for_tokens_nobody_reserved() -> None:
    """Rate 10/s, burst 1, the token taken: a background write asked for first still goes after
    the two foreground writes asked for after it (0.1, 0.2 s), at 0.3 s; two background writes
    go in the order they asked; with the bucket idle a background write goes at once."""
    clock = FakeClock()
    bucket = TokenBucket(clock, rate=10, burst=1)
    await bucket.acquire()
    done: list[tuple[str, float]] = []

    async def take(who: str, background: bool) -> None:
        await bucket.acquire(background=background)
        done.append((who, round(clock.now(), 6)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "bg1", True)
        await _settle()
        tg.start_soon(take, "bg2", True)
        await _settle()
        tg.start_soon(take, "fg1", False)
        await _settle()
        tg.start_soon(take, "fg2", False)
        await _settle()
        for _ in range(4):
            clock.advance(0.1)
            await _settle()
    assert done == [("fg1", 0.1), ("fg2", 0.2), ("bg1", 0.3), ("bg2", 0.4)]
    clock.advance(1)
    await bucket.acquire(background=True)  # idle bucket: no wait
    assert clock.sleepers == 0


@pytest.mark.asyncio
async def test_background_is_delayed_not_starved() -> None:
    """A foreground stream that uses the whole rate (one write every 0.1 s at 10/s) leaves no
    spare token, ever: the background write waits its limit, then queues as any write would."""
    clock = FakeClock()
    bucket = TokenBucket(clock, rate=10, burst=1)
    done: list[float] = []

    async def background() -> None:
        await bucket.acquire(background=True)
        done.append(clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(bucket.acquire)
        tg.start_soon(background)
        await _settle()
        steps = int(BACKGROUND_MAX_WAIT_S * 10) + 20
        for _ in range(steps):
            tg.start_soon(bucket.acquire)  # the next foreground write, before the refill
            await _settle()
            clock.advance(0.1)
            await _settle()
            if done:
                break
        tg.cancel_scope.cancel()  # the foreground writes still queued
    assert len(done) == 1
    assert BACKGROUND_MAX_WAIT_S <= done[0] <= BACKGROUND_MAX_WAIT_S + 0.5


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
