"""The controller under test as a child process, and what it costs (RSS, CPU-seconds).

Both controllers run as their own process, as a Deployment's pod would: this project's
(``python -m karpenter run --cloud-provider simulated``) and upstream's kwok provider (the Go
binary built by ``hack/build-upstream-kwok-provider.sh``). ``Controller`` starts one with the
same client rate limits and batch windows, and ``Sampler`` reads ``/proc/<pid>`` twice a second
so a phase can report its peak resident memory and the CPU-seconds it burned.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "bench" / "kwok_catalog.yaml"
UPSTREAM_BUILD = REPO / "hack" / "build-upstream-kwok-provider.sh"
# Both controllers' defaults (upstream's options and ours agree): stated here so the table can
# report them and neither side silently differs.
CLIENT_QPS, CLIENT_BURST = 200, 300
_TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A loopback port nobody listens on (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def upstream_binary() -> Path:
    """Upstream's kwok provider, built (or found in the cache) by the hack script."""
    proc = subprocess.run(
        ["bash", str(UPSTREAM_BUILD)], capture_output=True, text=True, timeout=3600, check=False
    )
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"{UPSTREAM_BUILD} failed")
    return Path(proc.stdout.strip().splitlines()[-1]) / "karpenter-kwok"


@dataclass
class Controller:
    """One controller process (``kind`` is ``ours`` or ``upstream``)."""

    kind: str
    kubeconfig: Path
    log: Path
    # py-spy's collapsed stacks of our controller land here (``--profile``); py-spy samples
    # from outside the process, so it costs the controller nothing measurable.
    profile: Path | None = None
    popen: subprocess.Popen[bytes] | None = None
    spy: subprocess.Popen[bytes] | None = None

    def command(self) -> tuple[list[str], dict[str, str]]:
        env = {
            **os.environ,
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(free_port()),
            "HEALTH_PROBE_PORT": str(free_port()),
            "KUBE_CLIENT_QPS": str(CLIENT_QPS),
            "KUBE_CLIENT_BURST": str(CLIENT_BURST),
            "BATCH_IDLE_DURATION": "1s",
            "BATCH_MAX_DURATION": "10s",
            "LOG_LEVEL": "info",
            "KUBECONFIG": str(self.kubeconfig),
        }
        if self.kind == "ours":
            env["PYTHONPATH"] = str(REPO)
            cmd = [sys.executable, "-m", "karpenter", "run", "--cloud-provider", "simulated"]
            cmd += ["--catalog", str(CATALOG), "--kubeconfig", str(self.kubeconfig)]
            return cmd, env
        # controller-runtime reads KUBECONFIG; the binary has no --kubeconfig flag
        env["SYSTEM_NAMESPACE"] = "kube-system"
        return [str(upstream_binary())], env

    def start(self) -> None:
        cmd, env = self.command()
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self.profile is not None and self.kind == "ours":
            spy = ["py-spy", "record", "--pid", str(self.popen.pid), "--rate", "50"]
            spy += ["--format", "raw", "--nonblocking", "--output", str(self.profile)]
            self.spy = subprocess.Popen(spy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self) -> None:
        spy, self.spy = self.spy, None
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                spy.wait(timeout=60)
            except subprocess.TimeoutExpired:
                spy.kill()
        proc, self.popen = self.popen, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process (all its threads) so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


@dataclass
class Sampler:
    """Peak RSS and CPU-seconds of one process over a phase."""

    pid: int
    started_cpu: float = 0.0
    started_at: float = 0.0
    peak_rss_mb: float = 0.0
    samples: list[float] = field(default_factory=list)

    def begin(self) -> None:
        self.started_cpu = cpu_seconds(self.pid)
        self.started_at = time.monotonic()
        self.peak_rss_mb = _rss_mb(self.pid)
        self.samples = []

    def sample(self) -> None:
        rss = _rss_mb(self.pid)
        self.samples.append(rss)
        self.peak_rss_mb = max(self.peak_rss_mb, rss)

    def cpu(self) -> float:
        """CPU-seconds since ``begin``."""
        return cpu_seconds(self.pid) - self.started_cpu
