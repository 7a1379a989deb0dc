"""``karpenter run`` and ``karpenter sandbox`` as processes: ready, working, clean on signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from karpenter.kube import client as kc
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

_REPO = Path(__file__).resolve().parents[2]


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(_REPO),
        METRICS_PORT="0",
        HEALTH_PROBE_PORT="0",
        BATCH_IDLE_DURATION="200ms",
        BATCH_MAX_DURATION="2s",
        DISABLE_LEADER_ELECTION="true",
    )
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "karpenter", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=log.parent,
        )


def _wait_for(proc: subprocess.Popen[bytes], log: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{text!r} not seen; output:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_run_stops_cleanly_on_sigterm(control_plane: ControlPlane, tmp_path: Path) -> None:
    """``karpenter run`` syncs its mirror, then exits 0 on SIGTERM."""
    log = tmp_path / "run.log"
    proc = _spawn(
        ["run", "--kubeconfig", str(control_plane.kubeconfig), "--catalog", "fake:4"], log
    )
    _wait_for(proc, log, "leading: starting controllers", 60)
    assert _stop(proc, signal.SIGTERM) == 0
    assert "signal received, shutting down" in log.read_text()


def _pod_running(kube: kc.KubeClient, name: str) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        obj = await kube.get(kc.PODS, name, "default")
        return bool(obj["status"].get("phase") == "Running")

    return probe


def _read_pid(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


@pytest.mark.asyncio
async def test_sandbox_serves_pods_restarts_its_controller_and_tears_down(
    tmp_path: Path,
) -> None:
    """``karpenter sandbox`` says where its binaries are and prints 'sandbox ready'; a pod
    applied gets a node and runs (kwok); the controller runs as its own process whose PID is on
    disk: SIGKILL it and the sandbox starts a new one that serves the next pod; Ctrl-C stops
    everything and removes the kubeconfig, which would otherwise point at a dead apiserver."""
    log = tmp_path / "sandbox.log"
    kubeconfig = tmp_path / "sb.kubeconfig"
    pid_file = tmp_path / "sb.kubeconfig.controller.pid"
    proc = _spawn(
        ["sandbox", "--kubeconfig", str(kubeconfig), "--catalog", "fake:4", "--boot-delay", "0"],
        log,
    )
    try:
        _wait_for(proc, log, "sandbox ready", 180)
        first = _read_pid(pid_file)
        assert first and first != proc.pid
        async with kc.connect(kubeconfig) as kube:
            assert (await kube.get(kc.NODEPOOLS, "default"))["metadata"]["name"] == "default"
            for name in ("hello", "again"):
                body = harness.pod(name, "default")
                body["spec"]["nodeSelector"] = {}  # any node of the sandbox's NodePool will do
                await kube.create(kc.PODS, body, "default")
                await harness.eventually(
                    _pod_running(kube, name), f"{name} Running on a sandbox node"
                )
                if name == "hello":
                    os.kill(first, signal.SIGKILL)
                    await harness.eventually(
                        _restarted(pid_file, first), "a new controller process", 60
                    )
        second = _read_pid(pid_file)
    finally:
        code = _stop(proc, signal.SIGINT)
    assert code == 0
    out = log.read_text()
    assert "karpenter: sandbox: control plane binaries: " in out
    assert not kubeconfig.exists()
    assert f"karpenter: sandbox: removed {kubeconfig} (its control plane is gone)" in out
    assert "controller exited; restarting" in out
    assert not pid_file.exists()
    for pid in (first, second):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _restarted(pid_file: Path, old: int) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        new = _read_pid(pid_file)
        return bool(new) and new != old

    return probe
