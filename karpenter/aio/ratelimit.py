"""A token bucket: at most ``rate`` acquisitions per second on average, ``burst`` at once.

client-go's client-side throttle (KUBE_CLIENT_QPS / KUBE_CLIENT_BURST): the bucket starts full,
refills continuously, and an acquirer that finds it empty sleeps on the injected clock exactly
until its token is due. Tokens are handed out in arrival order because each acquirer reserves
its token (possibly driving the level negative) before it sleeps.

Unlike client-go, a request can be *background*: bookkeeping that nothing waits on (a
NodeClaim's ``lastPodEventTime``, setting ``Consolidatable``). A background acquirer reserves
nothing while it waits; it takes a token only when the bucket holds one that no foreground
acquirer has reserved, so during a burst the writes that put pods on nodes (claims, launches,
nominations, the Node write that opens a node) go first and the bookkeeping follows in the
spare rate. Background acquirers queue among themselves in arrival order, one waiting on the
bucket at a time (hundreds polling it would burn the CPU the burst needs), and none waits more
than ``BACKGROUND_MAX_WAIT_S``: past that it reserves its token as a foreground acquirer would,
so a steady foreground stream delays it, never starves it.
"""

from __future__ import annotations

import anyio

from karpenter.aio.clock import Clock

BACKGROUND_MAX_WAIT_S = 10.0


class TokenBucket:
    """Client-side request throttle."""

    def __init__(self, clock: Clock, rate: float, burst: int) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError(f"rate and burst must be positive, got {rate}, {burst}")
        self.clock = clock
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = clock.now()
        self._background: anyio.Lock | None = None  # made on first use, inside the loop

    def _refill(self) -> None:
        now = self.clock.now()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, n: int = 1, *, background: bool = False) -> None:
        """Take ``n`` tokens (one reservation, in arrival order), waiting until they are due;
        ``background`` waits for tokens no foreground acquirer needs (module docstring)."""
        if n < 1:
            raise ValueError(f"tokens must be positive, got {n}")
        if background and await self._spare(n):
            return
        self._refill()
        self._tokens -= n
        if self._tokens < 0:
            await self.clock.sleep(-self._tokens / self.rate)

    async def _spare(self, n: int) -> bool:
        """Take ``n`` unreserved tokens once the bucket has them; False when the wait ran
        out (the caller then reserves as a foreground acquirer)."""
        deadline = self.clock.now() + BACKGROUND_MAX_WAIT_S
        if self._background is None:
            self._background = anyio.Lock()
        async with self._background:
            while True:
                self._refill()
                if self._tokens >= n - 1e-9:  # (a float refill may stop a hair short)
                    self._tokens -= n
                    return True
                left = deadline - self.clock.now()
                if left <= 0:
                    return False
                await self.clock.sleep(min((n - self._tokens) / self.rate, left))

    def try_acquire(self) -> bool:
        """Take one token if one is there now (client-go's ``TryAccept``); never waits."""
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True
