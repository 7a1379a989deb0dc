"""The C allocator's settings: arenas capped, freed memory handed back to the OS by a trim."""

from __future__ import annotations

import os
import threading

import pytest

from karpenter.aio import allocator

pytestmark = pytest.mark.skipif(not allocator.available(), reason="the C library is not glibc")

PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def _churn(kept: list[bytes]) -> None:
    """Allocate ~120 MB in 2 KB blocks (malloc's, not pymalloc's: over 512 bytes) and keep
    every twentieth: the freed blocks between the kept ones stay in the heap."""
    blocks = [bytes(2048) for _ in range(60_000)]
    kept.extend(blocks[::20])
    del blocks


def test_trim_hands_freed_heap_back() -> None:
    """Memory a worker thread freed stays resident until ``trim`` returns it to the OS."""
    kept: list[bytes] = []
    worker = threading.Thread(target=_churn, args=(kept,))
    worker.start()
    worker.join()
    before = _rss()
    assert allocator.trim()
    after = _rss()
    assert before - after > 60 * 2**20, (before, after)
    assert len(kept) == 3_000 and all(len(b) == 2048 for b in kept)


def test_arena_cap_is_accepted() -> None:
    """glibc takes the arena cap (``mallopt`` returns 1)."""
    assert allocator.cap_arenas(allocator.ARENAS)
