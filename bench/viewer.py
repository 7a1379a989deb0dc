"""Viewer benchmark: what keeping the screen current costs at 100..4000 nodes.

Feeds the mirror raw objects as the informers would (N initialized Nodes with their launched
NodeClaims, 10 bound pods each, 20 pending pods), then measures, best of 5:

* ``load``: the first ``Tracker.refresh`` (every row built);
* ``event``: one watch event (a pod binding to a node) applied and the rows refreshed (only
  that node's row is rebuilt);
* ``frame``: what the draw loop does per redraw besides drawing: refresh (nothing dirty),
  pending pods, totals, subtotals, filter+sort of every row;
* ``draw``: rendering the frame for a 200x50 terminal with rich (only the visible rows);
* ``solve``: the background pending-reason pass (the provisioner's ``solve`` on the snapshot,
  20 pending pods), which runs in a worker thread at most every 2 s.

Run: ``PYTHONPATH=. python3 bench/viewer.py [--sizes 100,500,1000,2000,4000]``.
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable

from rich.console import Console

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.state.cluster import ClusterState
from karpenter.viewer import model, screen
from karpenter.viewer.keys import Ui
from karpenter.viewer.tracker import WAITING, Tracker
from tests.support import rawobjects as raw

CATALOGUE = fake_instance_types(20)
NOW = 1_795_600_000.0


def _pool() -> dict[str, object]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "resourceVersion": "1"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}}}},
    }


def build(nodes: int) -> tuple[ClusterState, Tracker]:
    """The mirror after the informers' first lists, and the tracker following it."""
    state = ClusterState()
    tracker = Tracker(state, model.price_book(CATALOGUE))
    state.nodepools.replace([_pool()])
    state.nodeclaims.replace([raw.claim(f"n{i}", node_name=f"n{i}") for i in range(nodes)])
    state.nodes.replace([raw.node(f"n{i}", pool="default") for i in range(nodes)])
    pods = [
        raw.pod(f"p{i}-{j}", node_name=f"n{i}", cpu="100m") for i in range(nodes) for j in range(10)
    ]
    pods += [raw.pod(f"pending-{k}", cpu="500m") for k in range(20)]
    state.pods.replace(pods)
    return state, tracker


def best(runs: int, fn: Callable[[], object]) -> float:
    """Best wall time of ``runs`` calls, in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def measure(nodes: int) -> dict[str, float]:
    """One size's numbers."""
    state, tracker = build(nodes)
    load = best(1, tracker.refresh)
    counter = iter(range(10**9))

    def event() -> None:
        i = next(counter)
        state.pods.apply("ADDED", raw.pod(f"new-{i}", node_name=f"n{i % nodes}", cpu="100m"))
        tracker.refresh()

    def frame() -> screen.Frame:
        rows = tracker.refresh()
        pending = model.pending(tracker.pending_pods(), {}, NOW, WAITING)
        model.subtotals(rows)
        model.totals(rows)
        model.arrange(rows, "cpu", "")
        return screen.Frame(rows, pending, NOW)

    shown = frame()

    def draw() -> None:
        console = Console(file=io.StringIO(), width=200, height=50)
        renderable, _, _ = screen.render(shown, Ui(sort="cpu"), 50)
        console.print(renderable)

    def pending_solve() -> None:
        cluster = state.snapshot({"default": CATALOGUE})
        solve(cluster, state.provisionable_pods(), Options())

    return {
        "load": load,
        "event": best(5, event),
        "frame": best(5, frame),
        "draw": best(5, draw),
        "solve": best(3, pending_solve),
    }


def main() -> None:
    """Print a markdown table of the numbers per size."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,500,1000,2000,4000")
    args = parser.parse_args()
    print("| nodes | pods | load (ms) | event (ms) | frame (ms) | draw (ms) | solve (ms) |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        m = measure(size)
        print(
            f"| {size} | {size * 10 + 20} | {m['load']:.0f} | {m['event']:.2f} | "
            f"{m['frame']:.1f} | {m['draw']:.1f} | {m['solve']:.0f} |"
        )


if __name__ == "__main__":
    main()
