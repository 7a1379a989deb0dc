"""The cluster tools a person runs at a terminal: ``karpenter viewer`` and ``karpenter explain``.

Both read a live cluster through a kubeconfig and price it with a catalogue: the simulated
cloud's (``--catalog fake:N`` or a file, as ``run`` and ``sandbox`` take it) or, with
``--cloud-provider aws``, the AWS provider's offline catalogue for ``AWS_REGION`` (its real
instance types, priced from ``AWS_PRICE_FILE`` or the provider's labelled estimate; no AWS call
is made). Every failure is one line on stderr naming the cause, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
from pydantic import ValidationError

from karpenter import launch
from karpenter import settings as settings_mod
from karpenter.aio.clock import RealClock
from karpenter.aws_runtime import core_options as aws_options
from karpenter.core.model.cluster import Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.explain import live, render
from karpenter.simulate import awspreset
from karpenter.viewer import app

EXIT_BAD_INPUT = 2


class ToolError(Exception):
    """Bad flags or environment: one line for stderr."""


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags ``viewer`` and ``explain`` share: where the cluster is, how to price it."""
    parser.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG, else in-cluster")
    parser.add_argument(
        "--cloud-provider",
        choices=("simulated", "aws"),
        default=os.environ.get("KARPENTER_CLOUD_PROVIDER", "simulated"),
        help="whose catalogue prices nodes (default: $KARPENTER_CLOUD_PROVIDER, else simulated)",
    )
    parser.add_argument(
        "--catalog", default="fake:20", help="simulated: fake:N, or a YAML file of InstanceTypes"
    )


@dataclass(frozen=True, slots=True)
class Pricing:
    """The catalogue and the core options the tools decide with."""

    catalogue: tuple[InstanceType, ...]
    options: Options
    overlays: bool


def pricing(args: argparse.Namespace) -> Pricing:
    """The catalogue and options from flags and environment (ToolError when they are bad)."""
    try:
        settings = settings_mod.Settings()
    except (ValidationError, ValueError) as err:
        raise ToolError(f"invalid settings: {settings_mod.describe_error(err)}") from None
    overlays = settings.feature_gates["NodeOverlay"]
    if args.cloud_provider != "aws":
        try:
            types = launch.parse_catalog(args.catalog)
        except launch.LaunchError as err:
            raise ToolError(str(err)) from None
        return Pricing(types, settings.core_options(), overlays)
    try:
        aws = settings_mod.AWSSettings()
    except (ValidationError, ValueError) as err:
        raise ToolError(f"invalid settings: {settings_mod.describe_error(err)}") from None
    region = aws.AWS_REGION or os.environ.get("AWS_DEFAULT_REGION", "")
    if not region:
        raise ToolError("--cloud-provider aws: set AWS_REGION (the region whose prices to use)")
    try:
        preset = awspreset.build(region, "", aws)
    except awspreset.PresetError as err:
        raise ToolError(f"--cloud-provider aws: {err}") from None
    if preset.note():
        print(f"karpenter: note: {preset.note()}", file=sys.stderr)
    return Pricing(preset.types, aws_options(settings), overlays)


def kubeconfig(args: argparse.Namespace) -> Path | None:
    """``--kubeconfig``, else the first path of ``$KUBECONFIG``, else None (in-cluster)."""
    if args.kubeconfig:
        return Path(args.kubeconfig)
    value = os.environ.get("KUBECONFIG", "")
    return Path(value.split(os.pathsep)[0]) if value else None


def explain(args: argparse.Namespace) -> int:
    """``karpenter explain pod NS/NAME`` / ``karpenter explain node NAME``."""
    priced = pricing(args)
    req = live.Request(
        args.kind, args.name, priced.catalogue, priced.options, RealClock().now(), priced.overlays
    )
    try:
        doc = anyio.run(live.explain, kubeconfig(args), req)
    except live.ExplainError as err:
        raise ToolError(str(err)) from None
    fmt = args.output or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render.pod_table(doc) if args.kind == "pod" else render.node_table(doc))
    return 0


def viewer(args: argparse.Namespace) -> int:
    """``karpenter viewer``: runs until q or Ctrl-C."""
    priced = pricing(args)
    opts = app.ViewerOptions(
        kubeconfig=kubeconfig(args),
        nodepool=args.nodepool or "",
        selector=args.selector or "",
        catalogue=priced.catalogue,
        options=priced.options,
        overlays=priced.overlays,
    )
    try:
        return app.run(opts)
    except app.ViewerError as err:
        raise ToolError(str(err)) from None


def main(args: argparse.Namespace) -> int:
    """Dispatch; one line and exit 2 on any failure the tools know."""
    try:
        return explain(args) if args.command == "explain" else viewer(args)
    except ToolError as err:
        print(f"karpenter: {args.command}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 0
