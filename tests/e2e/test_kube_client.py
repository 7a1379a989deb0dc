"""The project's client on the real apiserver: requests in flight are capped, so a burst opens
at most that many TLS connections (each costs ~170 kB), and every request still succeeds."""

from __future__ import annotations

import types

import aiohttp
import anyio
import pytest

from karpenter.kube import client as kc
from karpenter.kube import transport
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


async def _burst(control_plane: ControlPlane, max_in_flight: int, requests: int) -> int:
    """Connections a burst of concurrent GETs opened (and check each answered)."""
    opened = 0

    async def on_create(
        session: aiohttp.ClientSession, ctx: types.SimpleNamespace, params: object
    ) -> None:
        nonlocal opened
        opened += 1

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(on_create)
    creds = transport.load(control_plane.kubeconfig)
    connector = aiohttp.TCPConnector(ssl=creds.ssl, limit=200)
    answers: list[str] = []
    async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as http:
        kube = kc.KubeClient(http, creds, max_in_flight=max_in_flight)

        async def one() -> None:
            ns = await kube.get(kc.NAMESPACES, "default")
            answers.append(ns["metadata"]["name"])

        async with anyio.create_task_group() as tg:
            for _ in range(requests):
                tg.start_soon(one)
        await anyio.sleep(0.25)  # let the TLS transports close before the loop does
    assert answers == ["default"] * requests
    return opened


@pytest.mark.asyncio
async def test_a_burst_opens_no_more_connections_than_slots(control_plane: ControlPlane) -> None:
    """60 concurrent requests through 4 in-flight slots open at most 4 connections."""
    assert await _burst(control_plane, max_in_flight=4, requests=60) <= 4


@pytest.mark.asyncio
async def test_without_the_cap_a_burst_opens_many_connections(
    control_plane: ControlPlane,
) -> None:
    """The same burst with 60 slots opens more than 4 connections (the cap is what limits)."""
    assert await _burst(control_plane, max_in_flight=60, requests=60) > 4
