"""``karpenter viewer`` in a real terminal: tmux runs it against the session's apiserver,
``send-keys`` drives it, ``capture-pane`` reads what a person would see."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.e2e.scene import PRICE, Scene, scene

pytestmark = pytest.mark.e2e
__all__ = ("scene",)  # the fixture, used by name

_REPO = Path(__file__).resolve().parents[2]
_TMUX = shutil.which("tmux") or "/usr/bin/tmux"


class Terminal:
    """One tmux session running a command, on a tmux server of its own (a shared server's
    options or attached clients would change the window size)."""

    def __init__(self, name: str, command: str) -> None:
        self.name = name
        self.tmux = [_TMUX, "-L", name, "-f", "/dev/null"]
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", name, "-x", "200", "-y", "45", command],
            check=True,
        )

    def screen(self) -> str:
        out = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-t", self.name],
            check=False,
            capture_output=True,
            text=True,
        )
        return out.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def wait(self, ok: Callable[[str], bool], what: str, wait_s: float = 60.0) -> str:
        deadline = time.monotonic() + wait_s
        while True:
            text = self.screen()
            if ok(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{text}")
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], check=False, capture_output=True)


def _exit_status(path: Path, wait_s: float = 20.0) -> str:
    deadline = time.monotonic() + wait_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return path.read_text().strip() if path.exists() else "still running"


def _viewer(control_plane: ControlPlane, pool: str, status: Path) -> Terminal:
    command = (
        # COLUMNS/LINES from the test runner's environment would override the pane's size
        f"cd {_REPO} && env -u COLUMNS -u LINES PYTHONPATH={_REPO} "
        f"{sys.executable} -m karpenter viewer "
        f"--kubeconfig {control_plane.kubeconfig} --nodepool {pool} --catalog fake:20; "
        f"echo $? > {status}; sleep 60"
    )
    return Terminal(harness.unique("viewer"), command)


def test_viewer_shows_nodes_prices_and_pending_reasons(
    control_plane: ControlPlane, scene: Scene, tmp_path: Path
) -> None:
    """The viewer shows the pool's node with its type, state, bars and price, the launching
    claim, totals in $/hour and $/month, and the pending pod's reason; s sorts, / filters,
    and q exits with status 0."""
    pool = scene.pool
    names = {"node": scene.node, "launching": scene.launching}
    status = tmp_path / "status"
    term = _viewer(control_plane, pool, status)
    try:
        text = term.wait(
            # a long reason wraps across lines in the pane: read it as a person would
            lambda s: "nodes 2" in s and "no instance type has 200 cpu" in " ".join(s.split()),
            "the rows and the pending reason",
        )
        assert "nodes 2  pods 2  " in text
        assert f"${PRICE:.4f}/hour  ${PRICE * 730:,.2f}/month (+1 unpriced)" in text
        assert f"{pool}: 2 nodes, 2 pods" in text
        row = next(line for line in text.splitlines() if line.startswith(names["node"]))
        for cell in ("fake-it-2", "spot", "test-zone-2", "initialized", "1.5/2.9", "6Gi",
                     f"${PRICE:.4f}"):  # fmt: skip
            assert cell in row, row
        assert "█████" in row  # 1.5 of 2.9 CPU: half the bar
        launching = next(line for line in text.splitlines() if line.startswith(names["launching"]))
        assert "launching" in launching and launching.rstrip().endswith("?")
        huge = next(line for line in text.splitlines() if f"{scene.ns}/huge" in line)
        assert "200" in huge
        term.keys("s")
        term.wait(lambda s: "sort: nodepool" in s, "the sort key to change")
        term.keys("S", "S")
        text = term.wait(lambda s: "sort: price" in s, "sorting by price")
        mine = (names["node"], names["launching"])
        rows = [line.split()[0] for line in text.splitlines() if line.startswith(mine)]
        assert rows == [names["node"], names["launching"]]  # dearest first, unpriced last
        term.keys("/", *names["launching"][:12], "Enter")
        text = term.wait(lambda s: "rows 1-1 of 1" in s, "the filter")
        assert names["node"] not in text and names["launching"] in text
        term.keys("q")
        assert _exit_status(status) == "0"
    finally:
        term.close()


def test_viewer_exits_cleanly_on_ctrl_c(
    control_plane: ControlPlane, scene: Scene, tmp_path: Path
) -> None:
    """Ctrl-C in the viewer ends it with status 0 and the terminal back in its normal mode."""
    pool = scene.pool
    status = tmp_path / "status"
    term = _viewer(control_plane, pool, status)
    try:
        term.wait(lambda s: "nodes 2" in s, "the first frame")
        term.keys("C-c")
        assert _exit_status(status) == "0"
        assert "Traceback" not in term.screen()
    finally:
        term.close()
