"""Credentials from kubeconfigs: server, TLS, token, token file, exec plugin, clear errors."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter.aio.clock import FakeClock
from karpenter.kube import transport
from karpenter.sandbox.pki import Pki


def _write(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster or {"server": "http://127.0.0.1:1/"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.asyncio
async def test_static_token_and_plain_http_server(tmp_path: Path) -> None:
    """A ``token`` user is sent as is; an http server needs no TLS; the trailing / goes."""
    creds = transport.load(_write(tmp_path, {"token": "abc"}))
    assert (creds.server, creds.ssl) == ("http://127.0.0.1:1", False)
    assert creds.token is not None and await creds.token() == "abc"


@pytest.mark.asyncio
async def test_token_file_is_reread_after_a_minute(tmp_path: Path) -> None:
    """A rotated token file is picked up once the re-read interval has passed."""
    token = tmp_path / "token"
    token.write_text("one\n")
    clock = FakeClock(100.0)
    creds = transport.load(_write(tmp_path, {"tokenFile": "token"}), clock)
    assert creds.token is not None and await creds.token() == "one"
    token.write_text("two")
    assert await creds.token() == "one"
    clock.advance(transport.TOKEN_REREAD_S)
    assert await creds.token() == "two"


@pytest.mark.asyncio
async def test_exec_plugin_token_is_cached_until_near_expiry(tmp_path: Path) -> None:
    """An exec plugin runs once; its token is reused until a minute before it expires."""
    counter = tmp_path / "count"
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, pathlib\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "print(json.dumps({'status': {'token': f't{n}', "
        "'expirationTimestamp': '2030-01-01T00:10:00Z'}}))\n"
    )
    user = {"exec": {"command": sys.executable, "args": [str(script)]}}
    start = 1893456000.0  # 2030-01-01T00:00:00Z
    clock = FakeClock(start)
    creds = transport.load(_write(tmp_path, user), clock)
    assert creds.token is not None
    assert [await creds.token(), await creds.token()] == ["t1", "t1"]
    clock.advance(600 - transport.EXEC_EXPIRY_MARGIN_S)
    assert await creds.token() == "t2"


def test_certificate_data_is_loaded(tmp_path: Path) -> None:
    """Embedded CA and client certificate data make a verifying TLS context."""
    pki = Pki(tmp_path / "pki")  # the local control plane's own throwaway CA
    pair = pki.issue("client", "someone")

    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    cluster = {"server": "https://127.0.0.1:1", "certificate-authority-data": b64(pki.ca.cert)}
    user = {"client-certificate-data": b64(pair.cert), "client-key-data": b64(pair.key)}
    creds = transport.load(_write(tmp_path, user, cluster))
    assert not isinstance(creds.ssl, bool)
    assert creds.token is None
    assert json.dumps(creds.ssl.get_ca_certs())  # the CA was loaded


@pytest.mark.parametrize(
    ("user", "error"),
    [
        pytest.param({"auth-provider": {"name": "gcp"}}, "auth-provider", id="auth-provider"),
        pytest.param({"username": "a", "password": "b"}, "basic auth", id="basic-auth"),
    ],
)
def test_unsupported_users_are_a_clear_error(
    tmp_path: Path, user: dict[str, Any], error: str
) -> None:
    """Legacy auth-provider and basic-auth users fail with one line naming them."""
    with pytest.raises(transport.ConfigError, match=error):
        transport.load(_write(tmp_path, user))


def test_missing_context_is_a_clear_error(tmp_path: Path) -> None:
    """A current-context that names no context says which one is missing."""
    path = _write(tmp_path, {"token": "x"})
    doc = yaml.safe_load(path.read_text())
    doc["current-context"] = "nope"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(transport.ConfigError, match="no context named 'nope'"):
        transport.load(path)
