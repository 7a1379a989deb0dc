"""Running the control-plane build script with its progress shown to a person.

A cold build takes minutes (two Go builds on two cores); a silent terminal that long looks
hung. The script's own step lines (stderr) are passed on as they come, each prefixed with the
time since the build started, and while a step is quiet a "still building" line says so every
``heartbeat_s``. Standard output is kept: its last line is the bin dir. The output of a failed
build is kept for the error message.
"""

from __future__ import annotations

import selectors
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Progress = Callable[[str], None]
HEARTBEAT_S = 30.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """The script's exit status, standard output and standard error."""

    returncode: int
    stdout: str
    stderr: str


def _stamp(elapsed: float) -> str:
    minutes, seconds = divmod(int(elapsed), 60)
    return f"[{minutes:d}m{seconds:02d}s]"


def run(
    script: Path,
    progress: Progress,
    *,
    timeout_s: float,
    heartbeat_s: float = HEARTBEAT_S,
) -> Outcome:
    """Run ``bash script``; report each stderr line (and heartbeats) through ``progress``."""
    # a wall-clock stopwatch for a person, not a controller decision
    start = time.monotonic()
    with subprocess.Popen(
        ["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        return _follow(proc, progress, start, timeout_s, heartbeat_s)


def _follow(
    proc: subprocess.Popen[str],
    progress: Progress,
    start: float,
    timeout_s: float,
    heartbeat_s: float,
) -> Outcome:
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes
    out: list[str] = []
    err: list[str] = []
    quiet_since = start
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map():
            if time.monotonic() - start > timeout_s:
                proc.kill()
                proc.wait()
                return Outcome(-9, "".join(out), "".join(err) + f"\ntimed out after {timeout_s}s")
            ready = sel.select(timeout=min(heartbeat_s, 1.0))
            for key, _ in ready:
                line = key.fileobj.readline()  # type: ignore[union-attr]
                if not line:
                    sel.unregister(key.fileobj)
                    continue
                key.data.append(line)
                if key.data is err:
                    progress(f"{_stamp(time.monotonic() - start)} {line.rstrip()}")
                    quiet_since = time.monotonic()
            if not ready and time.monotonic() - quiet_since >= heartbeat_s:
                progress(f"{_stamp(time.monotonic() - start)} still building...")
                quiet_since = time.monotonic()
    return Outcome(proc.wait(), "".join(out), "".join(err))
