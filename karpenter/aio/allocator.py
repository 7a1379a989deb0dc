"""The process's C allocator: few glibc malloc arenas, and freed memory handed back after a pass.

The controller decides in worker threads (``anyio.to_thread``) so the event loop keeps serving
watches, probes and Lease renewals. glibc gives each thread that allocates while another holds
the main arena an arena of its own (up to eight per core), and a decision pass allocates and
frees tens of megabytes of short-lived objects there: the freed pages stay in the arenas, so
the resident set grows with the number of arenas and the largest pass, not with what the
controller holds. Capping the arenas (``mallopt(M_ARENA_MAX)``, what ``MALLOC_ARENA_MAX``
sets) and trimming after a large pass (``malloc_trim``) keep RSS near the live data.

Both are no-ops where the C library is not glibc (musl, macOS): ``available()`` says whether
they act. Nothing here changes what Python allocates, only what the process keeps.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
ARENAS = 2  # the event loop's thread and one decision thread allocate at the same time


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    except (OSError, AttributeError):  # not glibc: no mallopt / malloc_trim
        return None
    return libc


def available() -> bool:
    """Whether the C library is glibc (the calls below act)."""
    return _libc() is not None


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Allow at most ``arenas`` malloc arenas (call before threads start); True if applied."""
    libc = _libc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1


def trim() -> bool:
    """Hand freed heap memory back to the OS; True if any was released."""
    libc = _libc()
    return libc is not None and libc.malloc_trim(0) == 1
