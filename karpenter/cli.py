"""Command-line entry: parses arguments and hands over to a composition root.

``karpenter simulate`` runs the decision core offline (see the README and the contract
in the shared spec). Exit status 0 when the simulation ran, 2 for bad input with one line on
stderr naming the document and field at fault; never a traceback for bad input.
``karpenter run`` runs the controller (``operator.Operator``) against a cluster, and
``karpenter sandbox`` starts a local control plane and runs the controller on it with the
simulated cloud (see ``launch``).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import ValidationError

from karpenter import failures
from karpenter import settings as settings_mod
from karpenter.providers import registry
from karpenter.simulate import loader, output, runner

EXIT_BAD_INPUT = 2
# The collector's thresholds while a simulation solves (CPython's default: 700, 10, 10). A
# solve allocates millions of short-lived containers (each what-if's copies, placements) and
# keeps a growing state (the plan's world and memos); at the default the collector ran about
# 4,500 young and 18 full collections in a 10,000-node plan, a fifth of its CPU, while the
# solve makes next to no cyclic garbage (peak RSS the same at either setting).
SOLVE_GC_THRESHOLDS = (50_000, 20, 20)


def _parse_now(text: str) -> float:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--now: not an RFC3339 time: {text!r}") from err
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _tool_flags(parser: argparse.ArgumentParser) -> None:
    """The flags ``viewer`` and ``explain`` share: where the cluster is, which cloud prices it."""
    parser.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG, else in-cluster")
    parser.add_argument(
        "--cloud-provider",
        choices=tuple(registry.PROVIDERS),
        default=os.environ.get("KARPENTER_CLOUD_PROVIDER", "simulated"),
        help="whose catalogue prices nodes (default: $KARPENTER_CLOUD_PROVIDER, else simulated)",
    )
    parser.add_argument(
        "--catalog", default="fake:20", help="simulated: fake:N, or a YAML file of InstanceTypes"
    )
    parser.set_defaults(boot_delay=0.0)  # the simulated provider reads it; nothing boots here


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="karpenter", description="Kubernetes node autoscaler")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="what would the controller do with this cluster?")
    sim.add_argument("files", nargs="+", metavar="FILE", help="YAML files, or - for stdin")
    sim.add_argument("--disruption", action="store_true", help="disruption mode")
    sim.add_argument("--output", choices=("json", "table"), default=None)
    sim.add_argument("--now", type=_parse_now, default=None, help="RFC3339 clock for decisions")
    sim.add_argument(
        "--respect-consolidate-after",
        action="store_true",
        help="disruption: count consolidateAfter at --now as the controller does (from the last"
        " pod event, else the Initialized transition) instead of taking it as elapsed",
    )
    run = sub.add_parser("run", help="run the controller against a cluster")
    run.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG, else in-cluster")
    run.add_argument(
        "--cloud-provider",
        choices=tuple(registry.PROVIDERS),
        default=os.environ.get("KARPENTER_CLOUD_PROVIDER", "simulated"),
        help="the cloud to launch in (default: $KARPENTER_CLOUD_PROVIDER, else simulated)",
    )
    _cloud_flags(run)
    box = sub.add_parser("sandbox", help="local control plane + controller + simulated cloud")
    box.add_argument("--kubeconfig", default="sandbox.kubeconfig", help="where to write it")
    box.add_argument("--no-nodepool", action="store_true", help="do not apply NodePool default")
    _cloud_flags(box)
    view = sub.add_parser("viewer", help="live terminal view of nodes, prices and pending pods")
    _tool_flags(view)
    view.add_argument("--nodepool", default="", help="only this NodePool's nodes")
    view.add_argument("--selector", default="", help="only nodes with these labels (k=v,k!=v,k)")
    why = sub.add_parser("explain", help="why is this pod pending, why is this node still here?")
    why.add_argument("kind", choices=("pod", "node"))
    why.add_argument("name", help="pod: NAMESPACE/NAME (default namespace: default); node: NAME")
    why.add_argument("--output", choices=("json", "table"), default=None)
    _tool_flags(why)
    return parser


def _cloud_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog", default="fake:20", help="fake:N, or a YAML file of InstanceType documents"
    )
    parser.add_argument(
        "--boot-delay", type=float, default=1.0, help="seconds from launch until the Node appears"
    )
    parser.add_argument(
        "--startup-taint-delay",
        type=float,
        default=1.0,
        help="seconds from a Node turning Ready until its node agent removes the NodePool's "
        "startupTaints (negative: never; a real agent DaemonSet removes them)",
    )


def _fail(message: str) -> int:
    print(f"karpenter: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def simulate(args: argparse.Namespace) -> int:
    """Run ``karpenter simulate``."""
    try:
        settings = settings_mod.Settings()
    except (ValidationError, ValueError) as err:
        return _fail(f"invalid settings: {settings_mod.describe_error(err)}")
    stdin_text = sys.stdin.read() if "-" in args.files else None
    try:
        scenario = loader.load(list(args.files), stdin_text, settings)
    except loader.ScenarioError as err:
        return _fail(str(err))
    # The snapshot lives until the process exits: collections during the solve need not
    # rescan its millions of objects.
    gc.freeze()
    for note in scenario.notes:
        print(f"karpenter: note: {note}", file=sys.stderr)
    now = args.now if args.now is not None else datetime.now(UTC).timestamp()  # noqa: TID251 - the CLI is the shell; the core takes `now` as an argument
    options = settings.core_options()
    saved = gc.get_threshold()
    gc.set_threshold(*SOLVE_GC_THRESHOLDS)
    try:
        if args.disruption:
            doc = runner.disruption(
                scenario, options, now, respect_consolidate_after=args.respect_consolidate_after
            )
            table = output.disruption_table
        else:
            doc = runner.provisioning(scenario, options)
            table = output.provisioning_table
    finally:
        gc.set_threshold(*saved)
    fmt = args.output or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        sys.stdout.write(output.dumps(doc) + "\n")
    else:
        print(table(doc))
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "simulate":
        return simulate(args)
    # Imported on demand: the controller's SDKs and event loop cost simulate 0.8 s to load.
    if args.command in ("run", "sandbox"):
        from karpenter import launch  # noqa: PLC0415

        return launch.main(args)
    if args.command in ("viewer", "explain"):
        from karpenter import tools  # noqa: PLC0415

        return tools.main(args)
    return _fail(f"unknown command {args.command}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``karpenter`` console script.

    Whatever fails, a person reads one line naming the cause and the exit status is 2
    (``KARPENTER_DEBUG=1`` re-raises, for a traceback).
    """
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except BrokenPipeError:
        # The reader went away (``| head``); nothing left to say, and no traceback.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 0
    except Exception as err:  # every subcommand's last line of defence: see failures.describe
        if os.environ.get("KARPENTER_DEBUG"):
            raise
        return _fail(f"{args.command}: {failures.describe(err)}")
