"""A token bucket: at most ``rate`` acquisitions per second on average, ``burst`` at once.

client-go's client-side throttle (KUBE_CLIENT_QPS / KUBE_CLIENT_BURST): the bucket starts full,
refills continuously, and an acquirer that finds it empty sleeps on the injected clock exactly
until its token is due. Tokens are handed out in arrival order because each acquirer reserves
its token (possibly driving the level negative) before it sleeps.
"""

from __future__ import annotations

from karpenter.aio.clock import Clock


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

    def _refill(self) -> None:
        now = self.clock.now()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, n: int = 1) -> None:
        """Take ``n`` tokens (one reservation, in arrival order), waiting until they are due."""
        if n < 1:
            raise ValueError(f"tokens must be positive, got {n}")
        self._refill()
        self._tokens -= n
        if self._tokens < 0:
            await self.clock.sleep(-self._tokens / self.rate)

    def try_acquire(self) -> bool:
        """Take one token if one is there now (client-go's ``TryAccept``); never waits."""
        self._refill()
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True
