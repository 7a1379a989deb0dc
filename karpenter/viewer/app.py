"""``karpenter viewer``: informers into the mirror, the tracker's rows onto a rich live screen.

The cloud provider is opened as ``karpenter explain`` opens it (``explain.live.opened``): its
instance types price the rows and feed the solver. One task group holds the informers
(list+watch of what the controller's mirror holds, plus the provider's kinds: the rows need
Nodes, NodeClaims and pods, the pending reasons need the whole snapshot), the keyboard
reader, the draw loop and the pending-reason solver. The draw loop redraws when the mirror's
version moved, a key was pressed, or a second passed (ages); it reads memory only, so there is
no polling of the apiserver. The solver runs the provisioner's ``solve`` in a worker thread at
most every ``solve_every_s`` while pods are pending and the mirror changed. ``q`` ends the task
group (exit 0); Ctrl-C arrives as SIGINT and ends it the same way.
"""

from __future__ import annotations

import io
import os
import sys
import termios
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
from rich.console import Console
from rich.live import Live

from karpenter.aio import groups
from karpenter.aio.clock import Clock, RealClock
from karpenter.cloud.plugin import Plugin
from karpenter.core.provisioning.scheduler import solve
from karpenter.explain.live import early_keys, opened, pool_types
from karpenter.explain.pods import placements
from karpenter.kube import client as kc
from karpenter.kube import errors
from karpenter.kube.informers import Informer
from karpenter.observability.logging import configure_logging
from karpenter.operator import mirror_feeds, run_until_signalled
from karpenter.providers import registry
from karpenter.settings import Settings
from karpenter.state.cluster import ClusterState
from karpenter.viewer import keys, model, screen
from karpenter.viewer import selector as sel
from karpenter.viewer.tracker import DECIDING, WAITING, Tracker

AGE_TICK_S = 1.0
SYNC_POLL_S = 0.2


class ViewerError(Exception):
    """One line naming why the viewer cannot start."""


@dataclass(frozen=True, slots=True)
class ViewerOptions:
    """Flags of ``karpenter viewer`` after parsing."""

    kubeconfig: Path | None
    provider: registry.Provider
    settings: Settings
    nodepool: str = ""
    selector: str = ""
    refresh_s: float = 0.25
    solve_every_s: float = 2.0


@dataclass
class Viewer:
    """The running viewer's state (one per process)."""

    opts: ViewerOptions
    state: ClusterState
    tracker: Tracker
    clock: Clock
    plugin: Plugin | None = None
    server: str = ""
    informers: list[Informer] = field(default_factory=list)
    ui: keys.Ui = field(default_factory=keys.Ui)
    reasons: dict[str, str] = field(default_factory=dict)
    page: int = 20
    total: int = 0
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _solved: int = -1

    def _early(self, now: float) -> frozenset[str]:
        """The pods the controller provisions before the kube-scheduler's verdict."""
        if not self.opts.settings.feature_gates["EarlyProvisioning"]:
            return frozenset()
        return early_keys(self.state, now)

    def frame(self) -> screen.Frame:
        """What the screen shows now."""
        now = self.clock.now()
        rows = self.tracker.refresh()
        pods = self.tracker.pending_pods()
        # a pod the scheduler gave up on (or, with EarlyProvisioning, left unjudged long enough)
        # but the solver has not seen yet is being decided on
        early = self._early(now)
        reasons = {p.key: DECIDING for p in pods if p.unschedulable_condition or p.key in early}
        reasons.update(self.reasons)
        pending = model.pending(pods, reasons, now, WAITING)
        synced = all(i.synced.is_set() for i in self.informers)
        return screen.Frame(rows, pending, now, self.server, synced)

    def draw(self, live: Live, height: int) -> None:
        """Render the frame into ``live``."""
        renderable, self.page, self.total = screen.render(self.frame(), self.ui, height)
        live.update(renderable, refresh=True)

    def press(self, data: str) -> None:
        """Apply typed keys."""
        for key in keys.tokens(data):
            self.ui = keys.handle(self.ui, key, self.page, self.total)
        self._changed.set()

    async def draw_loop(self, live: Live, console: Console) -> None:
        """Redraw on change, on a key, or every second; return when ``q`` was pressed."""
        drawn = -1
        last = 0.0
        while not self.ui.quit:
            now = self.clock.now()
            if self.state.version != drawn or self._changed.is_set() or now - last >= AGE_TICK_S:
                self._changed = anyio.Event()
                drawn = self.state.version
                last = now
                self.draw(live, console.size.height)
            with anyio.move_on_after(self.opts.refresh_s):
                await self._changed.wait()

    async def solve_loop(self) -> None:
        """Keep ``reasons`` current for pending pods (the provisioner's own solve): once the
        informers have listed, then after changes, at most every ``solve_every_s`` and never
        more than a tenth of the time (a pass over 2000 nodes takes about half a second)."""
        wait = SYNC_POLL_S
        while True:
            await self.clock.sleep(wait)
            synced = all(i.synced.is_set() for i in self.informers)
            if self.plugin is None or not synced or self.state.version == self._solved:
                continue
            self._solved = self.state.version
            started = self.clock.now()
            types = await pool_types(self.plugin, self.state, started)
            self.tracker.reprice(model.price_book(it for its in types.values() for it in its))
            if not self.tracker.pending:
                continue
            cluster = self.state.snapshot(types)
            pods = self.state.provisionable_pods(self._early(started))
            nodes = {n.name for n in cluster.nodes}
            results = await anyio.to_thread.run_sync(solve, cluster, pods, self.plugin.options)
            self.reasons = {k: why for k, (_, _, why) in placements(results, nodes).items()}
            self._changed.set()
            wait = max(self.opts.solve_every_s, 10 * (self.clock.now() - started))


@contextmanager
def _cbreak(fd: int) -> Iterator[None]:
    """Keys arrive one at a time, unechoed; Ctrl-C still raises SIGINT. Restored on exit."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _read_keys(viewer: Viewer, fd: int) -> None:
    while not viewer.ui.quit:
        await anyio.wait_readable(fd)
        data = os.read(fd, 64)
        if not data:
            return  # the terminal went away
        viewer.press(data.decode("utf-8", errors="ignore"))


async def _serve(viewer: Viewer, kube: kc.KubeClient, fd: int, console: Console) -> None:
    overlays = viewer.opts.settings.feature_gates["NodeOverlay"]
    extra = viewer.plugin.informers if viewer.plugin is not None else ()
    viewer.informers = [
        Informer(kube, resource, sink, viewer.clock)
        for resource, sink in [*mirror_feeds(viewer.state, overlays=overlays), *extra]
    ]
    with Live(console=console, screen=True, auto_refresh=False) as live:
        async with anyio.create_task_group() as tg:
            for informer in viewer.informers:
                tg.start_soon(informer.run)
            tg.start_soon(viewer.solve_loop)
            tg.start_soon(_read_keys, viewer, fd)
            await viewer.draw_loop(live, console)
            tg.cancel_scope.cancel()


async def _main(opts: ViewerOptions, fd: int) -> None:
    labels = sel.parse_selector(opts.selector)
    clock = RealClock()
    try:
        async with opened(opts.kubeconfig, opts.provider, opts.settings, clock) as (
            kube,
            host,
            plugin,
        ):
            tracker = Tracker(
                host.state, model.PriceBook(), nodepool=opts.nodepool, selector=labels
            )
            viewer = Viewer(opts, host.state, tracker, clock, plugin)
            viewer.server = kube.creds.server
            if not os.isatty(fd) or not sys.stdout.isatty():
                raise ViewerError("needs a terminal (stdin and stdout must be a TTY)")
            with _cbreak(fd):
                await _serve(viewer, kube, fd, Console())
    except errors.ClientSetupError as err:
        raise ViewerError(str(err)) from None


def run(opts: ViewerOptions) -> int:
    """Run until ``q`` or Ctrl-C; 0 on a clean exit (ViewerError for setup failures)."""
    try:
        sel.parse_selector(opts.selector)
    except sel.SelectorError as err:
        raise ViewerError(str(err)) from None
    # Informer retries would log over the screen; the screen shows "(syncing)" instead.
    configure_logging("error", True, stream=io.StringIO())
    fd = sys.stdin.fileno()
    try:
        anyio.run(run_until_signalled, lambda: _main(opts, fd))
    except BaseExceptionGroup as group:
        cause = groups.first(group, (ViewerError,))
        if cause is None:
            raise
        raise cause from None
    return 0
