"""Probe and metrics server: real HTTP on loopback for /metrics, /healthz and /readyz."""

from __future__ import annotations

import socket

import aiohttp
import anyio
import pytest

from karpenter.observability.metrics import Metrics
from karpenter.observability.server import serve_http

LOOPBACK = "127.0.0.1"


async def _get(port: int, path: str) -> tuple[int, str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{LOOPBACK}:{port}{path}") as response,
    ):
        return response.status, await response.text(), response.headers["Content-Type"]


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((LOOPBACK, port)) != 0


@pytest.mark.asyncio
async def test_metrics_health_and_readiness() -> None:
    """/metrics renders the registry, /healthz is ok, /readyz follows ready() (200 or 503)."""
    metrics = Metrics(version="9.9.9")
    metrics.nodes_created.labels(nodepool="default", zone="us-west-2a").inc()
    is_ready = False
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            ports = await tg.start(serve_http, metrics, LOOPBACK, 0, 0, lambda: is_ready)
            metrics_port, health_port = ports
            assert metrics_port != health_port

            status, body, ctype = await _get(metrics_port, "/metrics")
            assert status == 200
            assert ctype.startswith("text/plain")
            assert 'karpenter_nodes_created_total{nodepool="default",zone="us-west-2a"} 1.0' in body
            assert 'version="9.9.9"' in body

            assert (await _get(health_port, "/healthz"))[:2] == (200, "ok")
            assert (await _get(health_port, "/readyz"))[0] == 503
            is_ready = True
            assert (await _get(health_port, "/readyz"))[:2] == (200, "ok")

            # each port serves only its own paths
            assert (await _get(health_port, "/metrics"))[0] == 404
            assert (await _get(metrics_port, "/healthz"))[0] == 404
            tg.cancel_scope.cancel()
    assert _refused(metrics_port)
    assert _refused(health_port)


@pytest.mark.asyncio
async def test_port_in_use_fails_and_releases_the_other() -> None:
    """A taken health port raises OSError and the already-bound metrics port is closed again."""
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with socket.socket() as probe:
            probe.bind((LOOPBACK, 0))
            free = probe.getsockname()[1]
        with anyio.fail_after(10), pytest.RaisesGroup(OSError, flatten_subgroups=True):
            async with anyio.create_task_group() as tg:
                await tg.start(serve_http, Metrics(), LOOPBACK, free, busy, lambda: True)
    assert _refused(free)
