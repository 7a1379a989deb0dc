"""Before the provider starts: the region (env, then IMDS) and upstream's EC2 connectivity check."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from karpenter.providers.aws.cloud import startup
from karpenter.providers.aws.cloud.factory import open_provider
from karpenter.providers.aws.settings import AWSSettings
from tests.providers.aws.cloud.builders import Clock, NodeClasses
from tests.providers.aws.cloud.conftest import Moto, _session


@pytest_asyncio.fixture
async def imds() -> AsyncIterator[tuple[str, list[str]]]:
    """An IMDSv2 stand-in on loopback: a token, then the region only with that token."""
    seen: list[str] = []

    async def token(request: web.Request) -> web.Response:
        seen.append("token")
        return web.Response(text="tok-123")

    async def region(request: web.Request) -> web.Response:
        seen.append(request.headers.get("X-aws-ec2-metadata-token", ""))
        if request.headers.get("X-aws-ec2-metadata-token") != "tok-123":
            return web.Response(status=401)
        return web.Response(text="eu-central-1\n")

    app = web.Application()
    app.router.add_put("/latest/api/token", token)
    app.router.add_get("/latest/meta-data/placement/region", region)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.asyncio
async def test_region_order(imds: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_REGION wins, then AWS_DEFAULT_REGION, then IMDS (with its v2 token)."""
    url, seen = imds
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url)
    assert await startup.region("us-east-2", env={"AWS_DEFAULT_REGION": "x"}) == "us-east-2"
    assert await startup.region("", env={"AWS_DEFAULT_REGION": "ap-south-1"}) == "ap-south-1"
    assert seen == []  # IMDS is not asked while the environment answers
    assert await startup.region("", env={}) == "eu-central-1"
    assert seen == ["token", "tok-123"]


@pytest.mark.asyncio
async def test_no_region_anywhere_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without env and without an answering IMDS the provider refuses to guess."""
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", _closed_port())
    with pytest.raises(startup.StartupError, match=r"^AWS_REGION: not set"):
        await startup.region("", env={})


@pytest.mark.asyncio
async def test_connectivity_check_denied(moto: Moto, cluster: str) -> None:
    """An IAM denial of the dry run stops the provider with the action named."""
    settings = AWSSettings(
        CLUSTER_NAME=cluster, CLUSTER_ENDPOINT="https://k8s.example", AWS_REGION="us-east-1"
    )
    moto.capacity.deny.add("DescribeInstanceTypes")
    try:
        with pytest.raises(startup.StartupError, match="ec2:DescribeInstanceTypes"):
            async with open_provider(settings, NodeClasses(), Clock(), moto.proxy_url, _session()):
                pass
    finally:
        moto.capacity.deny.discard("DescribeInstanceTypes")
    assert moto.capacity.calls["DescribeInstanceTypes"] >= 1


@pytest.mark.asyncio
async def test_connectivity_check_unreachable(cluster: str) -> None:
    """No EC2 endpoint at all: the failure names the region before anything else runs."""
    settings = AWSSettings(
        CLUSTER_NAME=cluster, CLUSTER_ENDPOINT="https://k8s.example", AWS_REGION="us-east-1"
    )
    with pytest.raises(startup.StartupError, match="connectivity check failed in region us-east-1"):
        async with open_provider(settings, NodeClasses(), Clock(), _closed_port(), _session()):
            pass
