"""How this process reaches the apiserver: credentials from a kubeconfig or the pod's service
account, and the HTTP session that carries them.

A kubeconfig's current context names a cluster (``server``, ``certificate-authority`` or
``-data``, ``insecure-skip-tls-verify``, ``tls-server-name``) and a user: a client certificate
(``client-certificate``/``client-key``, or their ``-data`` forms), a bearer ``token`` or
``tokenFile``, or an ``exec`` credential plugin (``aws eks get-token`` and the like: its
ExecCredential token is cached until shortly before its ``expirationTimestamp``). In a pod, the
service account's token file is re-read every minute, as client-go does, because bound tokens
rotate. Anything else (legacy ``auth-provider``, basic auth) is a clear ``ConfigError``.

This used to be kubernetes_asyncio's configuration and ApiClient; importing that package costs
the controller about 40 MB of resident memory for generated models it never uses.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import yaml

from karpenter.aio.clock import Clock, RealClock
from karpenter.kube.errors import KubeconfigError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_S = 60.0
EXEC_EXPIRY_MARGIN_S = 60.0
USER_AGENT = "karpenter-py/0.1.0"

TokenSource = Callable[[], Awaitable[str]]


class ConfigError(KubeconfigError):
    """The kubeconfig (or in-cluster environment) cannot be used; one line says why."""


@dataclass(frozen=True)
class Credentials:
    """Where the apiserver is and how to authenticate to it."""

    server: str
    ssl: ssl.SSLContext | bool
    token: TokenSource | None = None
    server_hostname: str | None = None


def load(kubeconfig: Path | str | None, clock: Clock | None = None) -> Credentials:
    """Credentials from ``kubeconfig``, else from the in-cluster service account."""
    clock = clock or RealClock()
    if kubeconfig:
        return _from_kubeconfig(Path(kubeconfig), clock)
    return _in_cluster(clock)


def _in_cluster(clock: Clock) -> Credentials:
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigError(
            "no kubeconfig: pass --kubeconfig or set KUBECONFIG (this is not a pod in a"
            " cluster: KUBERNETES_SERVICE_HOST is unset)"
        )
    host = f"[{host}]" if ":" in host else host
    ctx = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    return Credentials(f"https://{host}:{port}", ctx, _file_token(SERVICE_ACCOUNT / "token", clock))


def _named(items: Any, name: str, kind: str) -> Mapping[str, Any]:
    for item in items or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            value = item.get(kind)
            return value if isinstance(value, Mapping) else {}
    raise ConfigError(f"kubeconfig: no {kind} named {name!r}")


def _read_kubeconfig(path: Path) -> Mapping[str, Any]:
    """The document, or one line saying why this file is not a usable kubeconfig."""
    if not path.is_file():
        raise ConfigError(f"kubeconfig {path}: no such file")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"kubeconfig {path}: {_first_line(err)}") from None
    if not isinstance(doc, dict) or not doc.get("contexts") or not doc.get("clusters"):
        raise ConfigError(f"kubeconfig {path}: not a kubeconfig (no clusters or contexts)")
    return doc


def _from_kubeconfig(path: Path, clock: Clock) -> Credentials:
    doc = _read_kubeconfig(path)
    current = str(doc.get("current-context") or "")
    if not current:
        raise ConfigError(f"kubeconfig {path}: no current-context")
    context = _named(doc.get("contexts"), current, "context")
    cluster = _named(doc.get("clusters"), str(context.get("cluster", "")), "cluster")
    user = _named(doc.get("users"), str(context.get("user", "")), "user")
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"kubeconfig {path}: cluster has no server")
    base = path.parent
    ctx = _tls(cluster, base)
    token: TokenSource | None = None
    if isinstance(ctx, ssl.SSLContext):
        _client_cert(ctx, user, base)
    if user.get("token"):
        fixed = str(user["token"])

        async def static() -> str:
            return fixed

        token = static
    elif user.get("tokenFile"):
        token = _file_token(_relative(base, str(user["tokenFile"])), clock)
    elif user.get("exec"):
        token = _exec_token(user["exec"], clock)
    elif user.get("auth-provider") or user.get("username"):
        raise ConfigError(f"kubeconfig {path}: auth-provider and basic auth are not supported")
    hostname = cluster.get("tls-server-name")
    return Credentials(server.rstrip("/"), ctx, token, str(hostname) if hostname else None)


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


def _relative(base: Path, name: str) -> Path:
    path = Path(os.path.expanduser(name))
    return path if path.is_absolute() else base / path


def _tls(cluster: Mapping[str, Any], base: Path) -> ssl.SSLContext | bool:
    if not str(cluster.get("server", "")).startswith("https"):
        return False
    if cluster.get("insecure-skip-tls-verify"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if cluster.get("certificate-authority-data"):
        data = base64.b64decode(str(cluster["certificate-authority-data"])).decode()
        return ssl.create_default_context(cadata=data)
    if cluster.get("certificate-authority"):
        ca = _relative(base, str(cluster["certificate-authority"]))
        return ssl.create_default_context(cafile=str(ca))
    return ssl.create_default_context()


def _client_cert(ctx: ssl.SSLContext, user: Mapping[str, Any], base: Path) -> None:
    if user.get("client-certificate-data") and user.get("client-key-data"):
        cert = base64.b64decode(str(user["client-certificate-data"]))
        key = base64.b64decode(str(user["client-key-data"]))
        # ssl loads key material from files only; the files live for the call alone
        with tempfile.TemporaryDirectory() as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(cert)
            key_file.write_bytes(key)
            key_file.chmod(0o600)
            ctx.load_cert_chain(str(cert_file), str(key_file))
    elif user.get("client-certificate") and user.get("client-key"):
        ctx.load_cert_chain(
            str(_relative(base, str(user["client-certificate"]))),
            str(_relative(base, str(user["client-key"]))),
        )


def _file_token(path: Path, clock: Clock) -> TokenSource:
    cached: dict[str, Any] = {"token": "", "at": -TOKEN_REREAD_S}

    async def token() -> str:
        now = clock.now()
        if now - cached["at"] >= TOKEN_REREAD_S:
            try:
                cached["token"] = (await anyio.Path(path).read_text(encoding="utf-8")).strip()
            except OSError as err:
                raise ConfigError(f"cannot read token file {path}: {err}") from None
            cached["at"] = now
        return str(cached["token"])

    return token


def _exec_token(spec: Mapping[str, Any], clock: Clock) -> TokenSource:
    command = [str(spec.get("command") or ""), *(str(a) for a in spec.get("args") or [])]
    env = dict(os.environ)
    for item in spec.get("env") or []:
        env[str(item.get("name"))] = str(item.get("value"))
    cached: dict[str, Any] = {"token": "", "until": -1.0}

    async def token() -> str:
        if clock.now() < cached["until"]:
            return str(cached["token"])
        try:
            done = await anyio.run_process(command, env=env, check=True)
        except (OSError, subprocess.CalledProcessError) as err:
            raise ConfigError(f"kubeconfig exec {command[0]!r} failed: {err}") from None
        status = (json.loads(done.stdout) or {}).get("status") or {}
        if not status.get("token"):
            raise ConfigError(f"kubeconfig exec {command[0]!r} returned no status.token")
        cached["token"] = str(status["token"])
        expires = status.get("expirationTimestamp")
        cached["until"] = (
            _parse_time(str(expires)) - EXEC_EXPIRY_MARGIN_S if expires else float("inf")
        )
        return str(cached["token"])

    return token


def _parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def session(creds: Credentials) -> aiohttp.ClientSession:
    """An HTTP session for the apiserver (the caller closes it); request URLs are
    ``creds.server`` + the API path, so a server URL with a path prefix works."""
    connector = aiohttp.TCPConnector(ssl=creds.ssl, limit=200)
    return aiohttp.ClientSession(connector=connector, headers={"User-Agent": USER_AGENT})
