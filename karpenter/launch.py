"""Launching the controller process: ``karpenter run`` and ``karpenter sandbox``.

``run`` builds settings from the environment, logging, a kube client, the cloud (the simulated
one with its catalog, or with ``--cloud-provider aws`` the AWS provider and its controllers
from ``aws_runtime``), and an ``operator.Operator``, then runs them under one task group until
SIGTERM/SIGINT. ``sandbox`` starts a local control plane with kwok (the same ones the e2e
tests use), writes its kubeconfig, installs the CRDs and an example NodePool, runs ``karpenter
run`` as its own child process under ``sandbox.supervisor`` (restarted when it dies, PID in
``<kubeconfig>.controller.pid``), and tears everything down on the way out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import yaml
from pydantic import ValidationError

from karpenter import settings as settings_mod
from karpenter.aio.clock import Clock, RealClock
from karpenter.aio.ratelimit import TokenBucket
from karpenter.api import schedulerconfig, simulation
from karpenter.api.errors import DecodeError
from karpenter.aws_runtime import core_options, open_aws
from karpenter.cloud.aws import startup
from karpenter.cloud.simulated import SimulatedCloud
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model.instancetype import InstanceType
from karpenter.kube import client as kc
from karpenter.kube.events import EventRecorder
from karpenter.kube.leader import LeaderElectionLost
from karpenter.observability.logging import configure_logging, get_logger
from karpenter.observability.metrics import Metrics
from karpenter.operator import Operator, run_until_signalled
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


def parse_catalog(spec: str) -> tuple[InstanceType, ...]:
    """``fake:N`` or a YAML file with InstanceType / InstanceTypeCatalog (preset fake) documents
    (other kinds are skipped, so a ``simulate`` scenario file works as a catalog)."""
    if spec.startswith("fake:"):
        try:
            count = int(spec.removeprefix("fake:"))
        except ValueError:
            raise LaunchError(f"--catalog: {spec!r}: expected fake:N") from None
        if not 1 <= count <= 10000:
            raise LaunchError(f"--catalog: {spec!r}: N must be from 1 to 10000")
        return fake_instance_types(count)
    try:
        docs = list(yaml.safe_load_all(Path(spec).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError) as err:
        raise LaunchError(f"--catalog: cannot read {spec}: {err}") from None
    types: list[InstanceType] = []
    for index, doc in enumerate(d for d in docs if d):
        types.extend(_catalog_doc(spec, index, doc))
    if not types:
        raise LaunchError(f"--catalog: {spec}: no InstanceType documents")
    return tuple(types)


def _catalog_doc(path: str, index: int, doc: Mapping[str, Any]) -> tuple[InstanceType, ...]:
    try:
        if doc.get("kind") == "InstanceType":
            return (simulation.instance_type(doc),)
        if doc.get("kind") == "InstanceTypeCatalog":
            preset = simulation.catalog(doc)
            if preset.preset != "fake":
                raise LaunchError(f"--catalog: {path}: only the fake preset is available")
            return fake_instance_types(preset.count)
    except DecodeError as err:
        raise LaunchError(f"--catalog: {path}: document {index + 1}: {err}") from None
    return ()  # other documents (a simulate scenario's NodePools, Pods...) are not the catalog


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
    catalog: tuple[InstanceType, ...],
    boot_delay_s: float,
    clock: Clock,
    *,
    agent_delay_s: float = 1.0,
    on_ready: str = "",
) -> None:
    """Run the controller with the simulated cloud until cancelled."""
    async with kc.connect(kubeconfig) as kube:
        kube.limiter = TokenBucket(clock, settings.KUBE_CLIENT_QPS, settings.KUBE_CLIENT_BURST)
        cloud = SimulatedCloud(
            kube,
            catalog,
            clock,
            boot_delay_s=boot_delay_s,
            startup_agent_delay_s=agent_delay_s if agent_delay_s >= 0 else None,
        )
        operator = Operator(kube, settings, cloud, clock, Metrics(), services=[cloud.run])
        async with anyio.create_task_group() as tg:
            await tg.start(operator.run)
            if on_ready:
                print(on_ready, flush=True)


async def serve_aws(
    kubeconfig: Path | None,
    settings: settings_mod.Settings,
    aws: settings_mod.AWSSettings,
    clock: Clock,
    *,
    endpoint_url: str | None = None,
    session: Any = None,
) -> None:
    """Run the controller with the AWS provider until cancelled."""
    async with kc.connect(kubeconfig) as kube:
        kube.limiter = TokenBucket(clock, settings.KUBE_CLIENT_QPS, settings.KUBE_CLIENT_BURST)
        state = ClusterState()
        metrics = Metrics()
        async with open_aws(
            kube,
            state,
            EventRecorder(kube, clock),
            aws,
            clock,
            endpoint_url=endpoint_url,
            session=session,
            min_values_best_effort=settings.MIN_VALUES_POLICY == "BestEffort",
            metrics=metrics,
            reserved_capacity=settings.feature_gates["ReservedCapacity"],
        ) as runtime:
            operator = Operator(
                kube,
                settings,
                runtime.cloud,
                clock,
                metrics,
                leader_services=runtime.leader_services,
                informers=runtime.informers,
                state=state,
                options=core_options(settings),
            )
            await operator.run()


def _aws_settings() -> settings_mod.AWSSettings:
    try:
        aws = settings_mod.AWSSettings()
    except (ValidationError, ValueError) as err:
        raise LaunchError(f"invalid settings: {settings_mod.describe_error(err)}") from None
    if not aws.CLUSTER_NAME:
        raise LaunchError("invalid settings: CLUSTER_NAME: required with --cloud-provider aws")
    return aws


def _with_region(aws: settings_mod.AWSSettings) -> settings_mod.AWSSettings:
    """The settings with the region resolved (AWS_REGION, AWS_DEFAULT_REGION, IMDS)."""
    try:
        found = anyio.run(startup.region, aws.AWS_REGION)
    except startup.StartupError as err:
        raise LaunchError(f"invalid settings: {err}") from None
    return aws.model_copy(update={"AWS_REGION": found})


def run(args: argparse.Namespace) -> int:
    """``karpenter run``."""
    settings = _settings()
    # Bad flags and settings fail before anything is configured.
    aws = _aws_settings() if args.cloud_provider == "aws" else None
    catalog = parse_catalog(args.catalog) if aws is None else ()
    configure_logging(
        settings.LOG_LEVEL or "info", settings.log_json, output_paths=settings.log_output_paths
    )
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else _env_kubeconfig()
    clock = RealClock()
    if aws is not None:
        aws = _with_region(aws)
        anyio.run(run_until_signalled, lambda: serve_aws(kubeconfig, settings, aws, clock))
        return 0
    anyio.run(
        run_until_signalled,
        lambda: serve(
            kubeconfig,
            settings,
            catalog,
            args.boot_delay,
            clock,
            agent_delay_s=args.startup_taint_delay,
        ),
    )
    return 0


def _env_kubeconfig() -> Path | None:
    value = os.environ.get("KUBECONFIG", "")
    return Path(value.split(os.pathsep)[0]) if value else None


def sandbox(args: argparse.Namespace) -> int:
    """``karpenter sandbox``: control plane + kwok + CRDs + NodePool, and the controller as its
    own child process (restarted when it dies), until Ctrl-C."""
    settings = _settings()
    parse_catalog(args.catalog)  # bad flags fail before anything is configured
    configure_logging(
        settings.LOG_LEVEL or "info", settings.log_json, output_paths=settings.log_output_paths
    )
    target = Path(args.kubeconfig).resolve()
    log = get_logger("sandbox")
    work_dir = Path(tempfile.mkdtemp(prefix="karpenter-sandbox-"))
    try:
        bin_dir = ensure_binaries()
        kwok_options = kwok.KwokOptions(kwok.ensure_kwok())
        log.info("starting control plane and kwok", work_dir=str(work_dir))
        with LocalControlPlane(
            bin_dir,
            work_dir / "controlplane",
            kwok=kwok_options,
            client_rate=PRODUCTION_CLIENT_RATE,
        ) as plane:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plane.kubeconfig, target)
            anyio.run(run_until_signalled, lambda: _sandbox_main(target, args, RealClock()))
    except (ControlPlaneError, kwok.KwokError) as err:
        print(f"karpenter: sandbox: {err}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 0


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
        f"{kubeconfig} get nodeclaims,nodes -w\n"
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
    except LaunchError as err:
        print(f"karpenter: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 0
    except LeaderElectionLost as err:
        return _lost(err)
    except startup.StartupError as err:
        print(f"karpenter: {err}", file=sys.stderr)
        return 1
    except BaseExceptionGroup as group:
        failed = group.subgroup(startup.StartupError)
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
