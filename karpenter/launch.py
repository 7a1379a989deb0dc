"""Launching the controller process: ``karpenter run`` and ``karpenter sandbox``.

Both build the same things: settings from the environment, logging, a kube client, the
operator's host (mirror, event recorder, clock, metrics), the cloud provider chosen by name
through ``providers.registry`` (``simulated`` with its catalog, or ``aws`` with its
controllers), one ``ControllerContext`` and an ``operator.Operator``, then run them under one
task group until SIGTERM/SIGINT. ``sandbox`` starts a local control plane with kwok (the same
ones the e2e tests use), writes its kubeconfig, installs the CRDs and an example NodePool, runs
``karpenter run`` as its own child process under ``sandbox.supervisor`` (restarted when it
dies, PID in ``<kubeconfig>.controller.pid``), and tears everything down on the way out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import anyio
from pydantic import ValidationError

from karpenter import settings as settings_mod
from karpenter.aio import allocator
from karpenter.aio.clock import Clock, RealClock
from karpenter.aio.ratelimit import TokenBucket
from karpenter.api import schedulerconfig
from karpenter.api.errors import DecodeError
from karpenter.cloud.plugin import Host, ProviderConfigError, ProviderStartupError
from karpenter.controllers.context import ControllerContext
from karpenter.kube import client as kc
from karpenter.kube import preflight
from karpenter.kube.events import EventRecorder
from karpenter.kube.leader import LeaderElectionLost
from karpenter.observability.logging import configure_logging, get_logger, sinks_are_terminals
from karpenter.observability.metrics import Metrics
from karpenter.operator import Operator, run_until_signalled
from karpenter.providers import registry
from karpenter.sandbox import bootstrap, kwok, supervisor
from karpenter.sandbox.controlplane import (
    PRODUCTION_CLIENT_RATE,
    ControlPlaneError,
    LocalControlPlane,
    ensure_binaries,
)
from karpenter.state.cluster import ClusterState

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


class LaunchError(ValueError):
    """Bad flags or environment: one line for stderr."""


def _settings() -> settings_mod.Settings:
    try:
        settings = settings_mod.Settings()
    except (ValidationError, ValueError) as err:
        raise LaunchError(f"invalid settings: {settings_mod.describe_error(err)}") from None
    try:
        schedulerconfig.load(settings.SCHEDULER_CONFIG)
    except DecodeError as err:
        raise LaunchError(f"invalid settings: SCHEDULER_CONFIG: {err}") from None
    return settings


async def serve(
    kubeconfig: Path | None,
    settings: settings_mod.Settings,
    provider: registry.Provider,
    clock: Clock,
    *,
    on_ready: str = "",
) -> None:
    """Run the controller with ``provider``'s cloud until cancelled."""
    async with kc.connect(kubeconfig) as kube:
        await preflight.check(kube)  # a dead apiserver or missing CRDs: one line, not retries
        kube.limiter = TokenBucket(clock, settings.KUBE_CLIENT_QPS, settings.KUBE_CLIENT_BURST)
        host = Host(kube, ClusterState(), EventRecorder(kube, clock), clock, Metrics(), settings)
        async with provider.open(host) as plugin:
            await preflight.check(kube, [resource for resource, _ in plugin.informers])
            operator = Operator(
                ControllerContext.of(host, plugin),
                services=plugin.services,
                leader_services=plugin.leader_services,
                informers=plugin.informers,
            )
            async with anyio.create_task_group() as tg:
                await tg.start(operator.run)
                if on_ready:
                    print(on_ready, flush=True)


def _configure_logging(settings: settings_mod.Settings) -> None:
    paths = settings.log_output_paths
    json_lines = settings.log_json_for(terminal=sinks_are_terminals(paths))
    configure_logging(settings.LOG_LEVEL or "info", json_lines, output_paths=paths)


def run(args: argparse.Namespace) -> int:
    """``karpenter run``."""
    settings = _settings()
    # Bad flags and settings fail before anything is configured.
    provider = registry.provider(args.cloud_provider, args)
    _configure_logging(settings)
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else _env_kubeconfig()
    clock = RealClock()
    provider = provider.startup()
    allocator.cap_arenas()  # before any thread: decisions run in worker threads
    anyio.run(run_until_signalled, lambda: serve(kubeconfig, settings, provider, clock))
    return 0


def _env_kubeconfig() -> Path | None:
    value = os.environ.get("KUBECONFIG", "")
    return Path(value.split(os.pathsep)[0]) if value else None


def sandbox(args: argparse.Namespace) -> int:
    """``karpenter sandbox``: control plane + kwok + CRDs + NodePool, and the controller as its
    own child process (restarted when it dies), until Ctrl-C."""
    settings = _settings()
    registry.provider("simulated", args)  # bad flags fail before anything is configured
    _configure_logging(settings)
    target = Path(args.kubeconfig).resolve()
    log = get_logger("sandbox")
    work_dir = Path(tempfile.mkdtemp(prefix="karpenter-sandbox-"))
    written = b""
    try:
        bin_dir = ensure_binaries(progress=_say)
        _say(f"control plane binaries: {bin_dir}")
        kwok_options = kwok.KwokOptions(kwok.ensure_kwok())
        log.info("starting control plane and kwok", work_dir=str(work_dir))
        with LocalControlPlane(
            bin_dir,
            work_dir / "controlplane",
            kwok=kwok_options,
            client_rate=PRODUCTION_CLIENT_RATE,
        ) as plane:
            target.parent.mkdir(parents=True, exist_ok=True)
            written = plane.kubeconfig.read_bytes()
            target.write_bytes(written)
            anyio.run(run_until_signalled, lambda: _sandbox_main(target, args, RealClock()))
    except (ControlPlaneError, kwok.KwokError) as err:
        print(f"karpenter: sandbox: {err}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        _remove_kubeconfig(target, written)
    return 0


def _say(line: str) -> None:
    print(f"karpenter: sandbox: {line}", file=sys.stderr, flush=True)


def _remove_kubeconfig(target: Path, written: bytes) -> None:
    """The control plane is gone: its kubeconfig would point at nothing. Remove it, unless
    someone replaced the file meanwhile."""
    try:
        if written and target.read_bytes() == written:
            target.unlink()
            _say(f"removed {target} (its control plane is gone)")
    except OSError:
        pass


def _controller_command(kubeconfig: Path, args: argparse.Namespace) -> list[str]:
    """``karpenter run`` against the sandbox, with the sandbox's cloud flags."""
    return [
        sys.executable, "-m", "karpenter", "run", "--cloud-provider", "simulated",
        "--kubeconfig", str(kubeconfig), "--catalog", args.catalog,
        "--boot-delay", str(args.boot_delay),
        "--startup-taint-delay", str(args.startup_taint_delay),
    ]  # fmt: skip


async def _sandbox_main(kubeconfig: Path, args: argparse.Namespace, clock: Clock) -> None:
    async with kc.connect(kubeconfig) as kube:
        await bootstrap.install_crds(kube, clock)
        if not args.no_nodepool:
            await bootstrap.apply_default_nodepool(kube)
    pids = supervisor.pid_file(kubeconfig)
    ready = (
        f"sandbox ready: kubeconfig written to {kubeconfig}\n"
        f"the controller runs as its own process; its PID is in {pids} "
        "(kill it: the sandbox starts it again)\n"
        f"try: kubectl --kubeconfig {kubeconfig} create deployment web --image=pause "
        "--replicas=3 && kubectl --kubeconfig "
        f"{kubeconfig} get nodeclaims,nodes,pods -w\n"
        f"watch it: karpenter viewer --kubeconfig {kubeconfig}\n"
        "Ctrl-C stops the controller and tears the control plane down."
    )
    announced: list[int] = []

    def on_start(pid: int) -> None:
        if not announced:
            print(ready, flush=True)
        announced.append(pid)

    await supervisor.Supervisor(
        _controller_command(kubeconfig, args), pids, clock, on_start=on_start
    ).run()


def main(args: argparse.Namespace) -> int:
    """Dispatch ``run`` / ``sandbox``; exit 2 with one line on bad input, 1 when leadership
    is lost (as upstream, the process ends and its replacement campaigns afresh)."""
    try:
        return run(args) if args.command == "run" else sandbox(args)
    except (LaunchError, ProviderConfigError) as err:
        print(f"karpenter: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 0
    except LeaderElectionLost as err:
        return _lost(err)
    except ProviderStartupError as err:
        print(f"karpenter: {err}", file=sys.stderr)
        return 1
    except BaseExceptionGroup as group:
        failed = group.subgroup(ProviderStartupError)
        if failed is not None:
            print(f"karpenter: {failed.exceptions[0]}", file=sys.stderr)
            return 1
        lost = group.subgroup(LeaderElectionLost)
        if lost is None:
            raise
        return _lost(lost)


def _lost(err: BaseException) -> int:
    get_logger("operator").error("leader election lost, exiting", error=str(err))
    return EXIT_FAILED
