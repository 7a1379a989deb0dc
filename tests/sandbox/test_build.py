"""The control-plane build's progress as a person sees it: step lines with elapsed time, and a
heartbeat while a step is quiet."""

from __future__ import annotations

import re
from pathlib import Path

from karpenter.sandbox import build


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "build.sh"
    path.write_text("set -e\n" + body)
    return path


def test_steps_are_reported_with_elapsed_time(tmp_path: Path) -> None:
    """Each stderr line is passed on at once, stamped with the time since the build started;
    a quiet step gets a heartbeat; stdout (the bin dir) is kept."""
    script = _script(
        tmp_path,
        'echo "build: [1/2] etcd" >&2\nsleep 0.7\necho "build: [2/2] kubernetes" >&2\n'
        "echo /cache/bin\n",
    )
    lines: list[str] = []
    outcome = build.run(script, lines.append, timeout_s=30, heartbeat_s=0.3)
    assert outcome.returncode == 0
    assert outcome.stdout.strip() == "/cache/bin"
    assert lines[0] == "[0m00s] build: [1/2] etcd"
    assert any(line.endswith("still building...") for line in lines[1:-1])
    assert re.fullmatch(r"\[0m0[01]s\] build: \[2/2\] kubernetes", lines[-1])


def test_a_failed_build_keeps_its_output(tmp_path: Path) -> None:
    """A failing script's status and stderr come back for the error message."""
    script = _script(tmp_path, 'echo "go: not found" >&2\nexit 3\n')
    lines: list[str] = []
    outcome = build.run(script, lines.append, timeout_s=30)
    assert (outcome.returncode, outcome.stderr.strip()) == (3, "go: not found")
    assert lines == ["[0m00s] go: not found"]
