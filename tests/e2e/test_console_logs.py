"""``karpenter run`` in a terminal logs for people; piped, it logs JSON lines."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

_REPO = Path(__file__).resolve().parents[2]
_READY = "leading: starting controllers"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LOG_ENCODING", None)
    env.update(
        PYTHONPATH=str(_REPO),
        METRICS_PORT="0",
        HEALTH_PROBE_PORT="0",
        DISABLE_LEADER_ELECTION="true",
        **extra,
    )
    return env


def _args(cp: ControlPlane) -> list[str]:
    return [sys.executable, "-m", "karpenter", "run", "--kubeconfig", str(cp.kubeconfig)]


def _read_until(fd: int, text: str, wait_s: float = 60.0) -> str:
    out = b""
    deadline = time.monotonic() + wait_s
    while text.encode() not in out:
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not seen in:\n{out.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
    return out.decode(errors="replace")


def test_a_terminal_gets_console_lines(control_plane: ControlPlane) -> None:
    """With LOG_ENCODING unset and stdout a terminal, lines are structlog's console format."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        _args(control_plane), stdout=slave, stderr=slave, stdin=slave, env=_env()
    )
    os.close(slave)
    try:
        text = _read_until(master, _READY)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        os.close(master)
    line = next(x for x in text.splitlines() if _READY in x)
    assert not line.lstrip().startswith("{")
    assert "[info" in line and "[operator]" in line


def test_a_pipe_gets_json_lines(control_plane: ControlPlane) -> None:
    """With LOG_ENCODING unset and stdout a pipe, every line is a JSON object."""
    proc = subprocess.Popen(
        _args(control_plane), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env()
    )
    assert proc.stdout is not None
    try:
        text = _read_until(proc.stdout.fileno(), _READY)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc.stdout.close()
    line = next(x for x in text.splitlines() if _READY in x)
    assert json.loads(line)["message"] == _READY
