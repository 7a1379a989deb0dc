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


def test_invalid_rates_are_refused() -> None:
    """A zero rate or burst is a configuration error."""
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(FakeClock(), rate=0, burst=1)
