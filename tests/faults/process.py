"""The controller as a real process for fault experiments: start, SIGKILL/SIGTERM, restart.

``karpenter run`` runs exactly as in a cluster (its own interpreter, its own event loop, its own
connections), so a SIGKILL leaves behind what a crashed pod leaves: half-done writes in the
apiserver and in EC2, nothing in memory. Every start appends to one log file per controller, so
the whole history (all incarnations) can be grepped afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READY_LINE = "cluster state synced"
LEADING_LINE = "leading: starting controllers"


def base_env(**extra: str) -> dict[str, str]:
    """The controller's environment: this worktree's code, short batch windows, any free ports,
    no inherited AWS or kube credentials (the experiment passes its own)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "KUBECONFIG", "KARPENTER_"))
    }
    env.update(
        PYTHONPATH=str(REPO),
        METRICS_PORT="0",
        HEALTH_PROBE_PORT="0",
        BATCH_IDLE_DURATION="200ms",
        BATCH_MAX_DURATION="2s",
        DISABLE_LEADER_ELECTION="true",
        LOG_LEVEL="info",
    )
    env.update(extra)
    return env


@dataclass
class Controller:
    """One controller replica (``karpenter run ARGS``) that can be killed and restarted."""

    args: list[str]
    env: Mapping[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    exits: list[int] = field(default_factory=list)  # exit codes of finished incarnations

    def start(self) -> None:
        """Start a new incarnation (the previous one must be gone)."""
        assert self.proc is None or self.proc.poll() is not None, "still running"
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            out.write(f"=== start {self.starts + 1} ===\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "karpenter", "run", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(self.env),
                cwd=self.log.parent,
            )
        self.starts += 1

    def current_log(self) -> str:
        """What this incarnation has written so far."""
        with self.log.open("rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    def wait_for(self, text: str, timeout_s: float = 240.0) -> float:
        """Block until this incarnation logs ``text``; returns when (monotonic)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.current_log():
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"controller exited before {text!r}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not logged in {timeout_s:.0f}s:\n{self.tail()}")
            time.sleep(0.05)
        return time.monotonic()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals, wait_s: float = 30.0) -> int:
        """Send ``sig`` and wait for the exit; returns the exit code."""
        proc = self.proc
        assert proc is not None
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            code = proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(timeout=10)
        self.exits.append(code)
        return code

    def stop(self) -> None:
        """SIGTERM (clean shutdown) if still running."""
        if self.alive():
            self.signal(signal.SIGTERM)

    def tail(self, lines: int = 60) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def lines(self) -> list[str]:
        """Every line every incarnation logged."""
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
