"""The batcher: windows, max items, per-item results and error fan-out."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from karpenter.providers.aws.cloud.batching import Batcher


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    async def double(self, items: Sequence[int]) -> list[int | BaseException]:
        self.batches.append(list(items))
        return [i * 2 if i >= 0 else ValueError(f"negative {i}") for i in items]


@pytest.mark.asyncio
async def test_concurrent_calls_share_one_batch() -> None:
    """Calls within the idle window run as one batch; each caller gets its own result."""
    rec = Recorder()
    batcher: Batcher[int, int] = Batcher(rec.double, idle=0.02, max_wait=1.0, max_items=100)
    got = await asyncio.gather(*(batcher.submit(i) for i in range(5)))
    assert got == [0, 2, 4, 6, 8]
    assert rec.batches == [[0, 1, 2, 3, 4]]


@pytest.mark.asyncio
async def test_max_items_closes_the_window() -> None:
    """A full window runs at once; later calls open a new one."""
    rec = Recorder()
    batcher: Batcher[int, int] = Batcher(rec.double, idle=0.5, max_wait=5.0, max_items=2)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.gather(*(batcher.submit(i) for i in range(4)))
    assert rec.batches == [[0, 1], [2, 3]]
    assert loop.time() - start < 0.4  # neither batch waited for the idle window


@pytest.mark.asyncio
async def test_item_errors_and_call_errors() -> None:
    """A per-item error goes to its caller only; an execute error goes to every caller."""
    rec = Recorder()
    batcher: Batcher[int, int] = Batcher(rec.double, idle=0.01, max_wait=1.0, max_items=10)
    ok, bad = await asyncio.gather(batcher.submit(1), batcher.submit(-1), return_exceptions=True)
    assert ok == 2 and isinstance(bad, ValueError)

    async def broken(items: Sequence[int]) -> list[int | BaseException]:
        raise RuntimeError("throttled")

    failing: Batcher[int, int] = Batcher(broken, idle=0.01, max_wait=1.0, max_items=10)
    results = await asyncio.gather(failing.submit(1), failing.submit(2), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)


@pytest.mark.asyncio
async def test_buckets_by_key() -> None:
    """Different keys never share a batch."""
    rec = Recorder()
    batcher: Batcher[int, int] = Batcher(rec.double, 0.02, 1.0, 100, key=lambda i: i % 2)
    await asyncio.gather(*(batcher.submit(i) for i in range(4)))
    assert sorted(rec.batches) == [[0, 2], [1, 3]]


@pytest.mark.asyncio
async def test_cancelled_leader_releases_followers() -> None:
    """If the caller leading a window is cancelled, the others get an error, not a hang."""
    rec = Recorder()
    batcher: Batcher[int, int] = Batcher(rec.double, idle=0.2, max_wait=1.0, max_items=100)
    leader = asyncio.ensure_future(batcher.submit(1))
    await asyncio.sleep(0)
    follower = asyncio.ensure_future(batcher.submit(2))
    await asyncio.sleep(0.01)
    leader.cancel()
    with pytest.raises(RuntimeError, match="abandoned"):
        await asyncio.wait_for(follower, 1.0)
    assert rec.batches == []
    assert await batcher.submit(3) == 6  # the next window works
