"""The cluster tools a person runs at a terminal: ``karpenter viewer`` and ``karpenter explain``.

Both read a live cluster through a kubeconfig and open the cloud provider chosen by name
(``providers.registry``, ``--cloud-provider`` as ``run`` takes it) the way the controller does,
for the instance types and prices it offers each NodePool: the simulated cloud's catalogue
(``--catalog fake:N`` or a file) or the AWS provider's (its EC2 catalogue and pricing; AWS
settings and credentials as for ``run``). The provider's services are not started. Every
failure is one line on stderr naming the cause, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio
from pydantic import ValidationError

from karpenter import settings as settings_mod
from karpenter.aio import groups
from karpenter.aio.clock import RealClock
from karpenter.cloud.plugin import ProviderConfigError, ProviderStartupError
from karpenter.explain import live, render
from karpenter.providers import registry
from karpenter.viewer import app

EXIT_BAD_INPUT = 2


class ToolError(Exception):
    """Bad flags or environment: one line for stderr."""


def settings() -> settings_mod.Settings:
    """The controller's settings from the environment (ToolError when invalid)."""
    try:
        return settings_mod.Settings()
    except (ValidationError, ValueError) as err:
        raise ToolError(f"invalid settings: {settings_mod.describe_error(err)}") from None


def provider(args: argparse.Namespace) -> registry.Provider:
    """The chosen provider, configured and started up (ToolError with its one line)."""
    try:
        return registry.provider(args.cloud_provider, args).startup()
    except (ProviderConfigError, ProviderStartupError) as err:
        raise ToolError(str(err)) from None


def kubeconfig(args: argparse.Namespace) -> Path | None:
    """``--kubeconfig``, else the first path of ``$KUBECONFIG``, else None (in-cluster)."""
    if args.kubeconfig:
        return Path(args.kubeconfig)
    value = os.environ.get("KUBECONFIG", "")
    return Path(value.split(os.pathsep)[0]) if value else None


def explain(args: argparse.Namespace) -> int:
    """``karpenter explain pod NS/NAME`` / ``karpenter explain node NAME``."""
    config = settings()
    chosen = provider(args)
    req = live.Request(args.kind, args.name)
    try:
        doc = anyio.run(live.explain, kubeconfig(args), chosen, config, RealClock(), req)
    except live.ExplainError as err:
        raise ToolError(str(err)) from None
    except BaseExceptionGroup as group:  # a provider's task group failing while it opens
        cause = groups.first(group, (live.ExplainError, ProviderStartupError))
        if cause is None:
            raise
        raise ToolError(str(cause)) from None
    fmt = args.output or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render.pod_table(doc) if args.kind == "pod" else render.node_table(doc))
    return 0


def viewer(args: argparse.Namespace) -> int:
    """``karpenter viewer``: runs until q or Ctrl-C."""
    opts = app.ViewerOptions(
        kubeconfig=kubeconfig(args),
        provider=provider(args),
        settings=settings(),
        nodepool=args.nodepool or "",
        selector=args.selector or "",
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
