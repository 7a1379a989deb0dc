"""Upstream Karpenter's performance suite, run against this controller and upstream's side by side.

Each scenario of kubernetes-sigs/karpenter ``test/suites/performance`` (basic 1000 pods with
consolidation to 700, do-not-disrupt, drift, hostname spreading, XL 2000, wide deployments;
shapes in ``bench/perf/workloads.py``) runs on a fresh local control plane + kwok, once with
this controller (``python -m karpenter run --cloud-provider simulated``) and once with
upstream's kwok provider (``hack/build-upstream-kwok-provider.sh``), both as child processes
with the same NodePool, the same instance catalogue (``bench/kwok_catalog.yaml``, generated from
upstream's kwok instance types) and the same client rate limits. The control plane's scheduler
and controller-manager run with production client rates (reported in the header).

Prints, per scenario and phase: seconds, nodes, fleet price, CPU/memory utilisation, controller
peak RSS and CPU-seconds — both controllers side by side with the ratio ours/upstream — and
writes every row as JSON (``--json``). Run by hand (tens of minutes per scenario at full scale):

    python3 bench/perf_suite.py --scenarios basic [--controllers ours,upstream] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.perf import runner
from bench.perf.processes import CLIENT_BURST, CLIENT_QPS
from bench.perf.workloads import scenarios
from karpenter.sandbox.controlplane import PRODUCTION_CLIENT_RATE

COLUMNS = (
    ("seconds", "s", "{:.0f}"),
    ("nodes", "nodes", "{:d}"),
    ("price", "$/h", "{:.2f}"),
    ("cpu_util", "cpu", "{:.2f}"),
    ("memory_util", "mem", "{:.2f}"),
    ("peak_rss_mb", "MB", "{:.0f}"),
    ("cpu_s", "CPU-s", "{:.1f}"),
)


def header() -> str:
    """Machine, date, load and the rate settings in force."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rate = PRODUCTION_CLIENT_RATE
    return (
        f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "  # noqa: TID251
        f"{os.cpu_count()} CPUs, load {load}\n"
        f"# kube-scheduler and kube-controller-manager: --kube-api-qps={rate.qps:g} "
        f"--kube-api-burst={rate.burst}; both controllers: KUBE_CLIENT_QPS={CLIENT_QPS} "
        f"KUBE_CLIENT_BURST={CLIENT_BURST}, batch 1s/10s"
    )


def table(rows: list[runner.PhaseResult]) -> str:
    """Markdown: one line per scenario phase, ours | upstream | ratio for each column."""
    by = {(r.scenario, r.phase, r.controller): r for r in rows}
    keys = list(dict.fromkeys((r.scenario, r.phase) for r in rows))
    head = ["scenario", "phase"] + [f"{label} ours / upstream (×)" for _, label, _ in COLUMNS]
    head += ["lost", "ref nodes", "limit s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for scenario, phase in keys:
        ours, up = by.get((scenario, phase, "ours")), by.get((scenario, phase, "upstream"))
        cells = [scenario, phase]
        for attr, _, fmt in COLUMNS:
            cells.append(_cell(ours, up, attr, fmt))
        lost = "/".join(str(r.lost) for r in (ours, up) if r is not None)
        any_row = ours or up
        assert any_row is not None
        cells += [lost, str(any_row.reference_nodes), f"{any_row.limit_s:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(
    ours: runner.PhaseResult | None, up: runner.PhaseResult | None, attr: str, fmt: str
) -> str:
    def one(r: runner.PhaseResult | None) -> str:
        if r is None:
            return "–"
        text = fmt.format(getattr(r, attr))
        return text if r.settled or attr != "seconds" else f">{text}"

    cell = f"{one(ours)} / {one(up)}"
    if ours is not None and up is not None and getattr(up, attr):
        cell += f" ({getattr(ours, attr) / getattr(up, attr):.2f})"
    return cell


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM tears the clusters down like Ctrl-C


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = scenarios()
    parser.add_argument("--scenarios", default="basic", help=f"comma list of {sorted(every)}")
    parser.add_argument("--controllers", default="ours,upstream")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink pod counts (quick runs)")
    # longer than consolidateAfter (30 s) plus a disruption round, as upstream's 3-minute wait
    parser.add_argument("--quiet", type=float, default=120.0, help="settled after N s unchanged")
    parser.add_argument(
        "--cap", type=float, default=float("inf"), help="wait at most N s per phase"
    )
    parser.add_argument("--json", default="", help="append rows as JSON lines here")
    parser.add_argument(
        "--phases", default="", help="run only these phases (comma list, e.g. scale-out)"
    )
    parser.add_argument("--profile", action="store_true", help="py-spy our controller")
    parser.add_argument(
        "--audit", action="store_true", help="audit-log writes (finer scale-out timeline)"
    )
    parser.add_argument("--work", default="", help="keep logs here (default: a temp dir)")
    args = parser.parse_args()
    chosen = scenarios(args.scale)
    if args.phases:
        keep = set(args.phases.split(","))
        chosen = {
            n: dataclasses.replace(s, phases=tuple(p for p in s.phases if p.kind in keep))
            for n, s in chosen.items()
        }
    names = [n for n in args.scenarios.split(",") if n]
    unknown = [n for n in names if n not in chosen]
    if unknown:
        known = sorted(chosen)
        print(f"perf_suite: --scenarios: unknown {unknown}; known: {known}", file=sys.stderr)
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="perf-suite-"))
    print(header(), flush=True)
    rows: list[runner.PhaseResult] = []
    for name in names:
        for kind in args.controllers.split(","):
            where = work / f"{name}-{kind}"
            results = runner.run_scenario(
                chosen[name], kind, where, args.quiet, args.profile, args.cap, args.audit
            )
            rows.extend(results)
            for r in results:
                print(json.dumps(r.row()), flush=True)
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as out:
                        out.write(json.dumps(r.row()) + "\n")
    print(table(rows))
    print(f"# logs: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
