"""The sandbox's controller process: started as a child, restarted when it dies, PID on disk.

In a cluster the controller is a Deployment's pod: a process of its own that the kubelet
restarts when it exits. ``karpenter sandbox`` does the same for ``karpenter run``: the child
shares the sandbox's stdout/stderr, its PID is written to ``<kubeconfig>.controller.pid`` (so
anyone can ``kill -9`` it to see what happens), and whenever it exits while the sandbox runs it
is started again — at once after a long run, with a back-off (1 s doubling to 10 s) while it
keeps dying young, like a kubelet's CrashLoopBackOff. Stopping the sandbox stops the child
(SIGTERM, then SIGKILL after the grace) and removes the PID file.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc
import structlog

from karpenter.aio.clock import Clock

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 10.0
HEALTHY_RUN_S = 30.0  # a child that lived this long restarts without back-off
STOP_GRACE_S = 15.0


def pid_file(kubeconfig: Path) -> Path:
    """Where the controller's PID is written, beside the sandbox's kubeconfig."""
    return kubeconfig.with_name(kubeconfig.name + ".controller.pid")


class Supervisor:
    """Keeps one controller process running (see the module docstring)."""

    def __init__(
        self,
        command: Sequence[str],
        pid_path: Path,
        clock: Clock,
        *,
        env: dict[str, str] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> None:
        self.command = list(command)
        self.pid_path = pid_path
        self.clock = clock
        self.env = env
        self.on_start = on_start
        self.starts = 0
        self._log = structlog.get_logger().bind(component="sandbox.supervisor")

    async def run(self) -> None:
        """Run (and re-run) the child until cancelled; then stop it."""
        backoff = BACKOFF_START_S
        try:
            while True:
                started = self.clock.now()
                code = await self._run_once()
                lived = self.clock.now() - started
                backoff = BACKOFF_START_S if lived >= HEALTHY_RUN_S else backoff
                self._log.warning(
                    "controller exited; restarting", exit_code=code, restart_in=backoff
                )
                await self.clock.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
        finally:
            self.pid_path.unlink(missing_ok=True)

    async def _run_once(self) -> int:
        process = await anyio.open_process(
            self.command, stdin=subprocess.DEVNULL, stdout=None, stderr=None, env=self.env
        )
        self.starts += 1
        self.pid_path.write_text(f"{process.pid}\n", encoding="utf-8")
        self._log.info("controller started", pid=process.pid, pid_file=str(self.pid_path))
        if self.on_start is not None:
            self.on_start(process.pid)
        try:
            return await process.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
                await process.aclose()


async def _stop(process: anyio.abc.Process) -> None:
    if process.returncode is not None:
        return
    try:
        process.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        return
    with anyio.move_on_after(STOP_GRACE_S):
        await process.wait()
        return
    try:
        os.kill(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    await process.wait()
