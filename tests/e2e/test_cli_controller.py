"""``karpenter run`` and ``karpenter sandbox`` as processes: ready, working, clean on signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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


@pytest.mark.asyncio
async def test_sandbox_serves_pods_and_tears_down(tmp_path: Path) -> None:
    """``karpenter sandbox`` says where its binaries are and prints 'sandbox ready'; a pod
    applied then gets a node; Ctrl-C stops everything and removes the kubeconfig, which would
    otherwise point at a dead apiserver."""
    log = tmp_path / "sandbox.log"
    kubeconfig = tmp_path / "sb.kubeconfig"
    proc = _spawn(
        ["sandbox", "--kubeconfig", str(kubeconfig), "--catalog", "fake:4", "--boot-delay", "0"],
        log,
    )
    try:
        _wait_for(proc, log, "sandbox ready", 120)
        async with kc.connect(kubeconfig) as kube:
            assert (await kube.get(kc.NODEPOOLS, "default"))["metadata"]["name"] == "default"
            body = harness.pod("hello", "default")
            body["spec"]["nodeSelector"] = {}  # any node of the sandbox's NodePool will do
            await kube.create(kc.PODS, body, "default")

            async def bound() -> bool:
                obj = await kube.get(kc.PODS, "hello", "default")
                return bool(obj["spec"].get("nodeName"))

            await harness.eventually(bound, "the sandbox to give the pod a node")
    finally:
        code = _stop(proc, signal.SIGINT)
    assert code == 0
    out = log.read_text()
    assert "karpenter: sandbox: control plane binaries: " in out
    assert not kubeconfig.exists()
    assert f"karpenter: sandbox: removed {kubeconfig} (its control plane is gone)" in out
