"""Probe and metrics HTTP server: /metrics on one port, /healthz and /readyz on another.

The ports mirror upstream's METRICS_PORT and HEALTH_PROBE_PORT. ``/healthz`` answers as long as
the event loop serves requests (a wedged loop fails the liveness probe); ``/readyz`` asks the
operator's ``ready`` callable, which is where "caches synced and CRDs present" is decided.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc
from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from karpenter.observability.metrics import Metrics


def _metrics_app(metrics: Metrics) -> web.Application:
    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    return app


def _health_app(ready: Callable[[], bool]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    # access_log=None: a probe every few seconds would otherwise be most of the log
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1]  # (host, port, ...) of the first listening socket
    return runner, int(bound)


async def serve_http(
    metrics: Metrics,
    host: str,
    metrics_port: int,
    health_port: int,
    ready: Callable[[], bool],
    *,
    task_status: anyio.abc.TaskStatus[tuple[int, int]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports ``(metrics_port, health_port)`` as bound (0 = any free)."""
    runners: list[web.AppRunner] = []
    try:
        metrics_runner, bound_metrics = await _start(_metrics_app(metrics), host, metrics_port)
        runners.append(metrics_runner)
        health_runner, bound_health = await _start(_health_app(ready), host, health_port)
        runners.append(health_runner)
        task_status.started((bound_metrics, bound_health))
        await anyio.sleep_forever()
    finally:
        # shielded: cancellation is how this ends, and the sockets must still be closed
        with anyio.CancelScope(shield=True):
            for runner in reversed(runners):
                await runner.cleanup()
