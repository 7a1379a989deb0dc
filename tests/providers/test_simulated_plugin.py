"""The simulated machines talk to the apiserver with their own throttle, not the controller's."""

from __future__ import annotations

import aiohttp
import anyio
import pytest

from karpenter.aio.clock import FakeClock
from karpenter.aio.ratelimit import TokenBucket
from karpenter.kube import transport
from karpenter.kube.client import KubeClient
from karpenter.providers.simulated.plugin import machines_client


@pytest.mark.asyncio
async def test_machines_spend_their_own_request_budget() -> None:
    clock = FakeClock()
    async with aiohttp.ClientSession() as http:
        creds = transport.Credentials("https://127.0.0.1:1", ssl=False)
        controller = KubeClient(http, creds, TokenBucket(clock, 5.0, 2))
        machines = machines_client(controller, clock)
        assert machines is not controller and machines.limiter is not controller.limiter
        assert machines.limiter is not None and controller.limiter is not None
        assert (machines.limiter.rate, machines.limiter.burst) == (5.0, 2)
        assert (machines.http, machines.creds) == (controller.http, controller.creds)
        # the machines drain their own bucket (a third request waits for the clock) ...
        for _ in range(2):
            await machines.limiter.acquire()
        with pytest.raises(TimeoutError), anyio.fail_after(0.2):
            await machines.limiter.acquire()
        # ... and the controller's burst is still whole
        with anyio.fail_after(0.2):
            for _ in range(2):
                await controller.limiter.acquire()
        # unthrottled clients (tests, tools) stay as they are
        bare = KubeClient(http, creds)
        assert machines_client(bare, clock) is bare
