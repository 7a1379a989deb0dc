"""The fault matrix's full runs (docs/reliability.md): the same experiments as tests/faults,
with more trials, on a control plane and a moto server of their own.

    python3 bench/faults_matrix.py crash --trials 100 --seed 1
    python3 bench/faults_matrix.py simcrash --trials 24 --seed 1
    python3 bench/faults_matrix.py ec2 --trials 5 [--rate-scale 2]
    python3 bench/faults_matrix.py failover --trials 5
    python3 bench/faults_matrix.py controlplane --trials 3
    python3 bench/faults_matrix.py drains --trials 3

Each prints one line per trial and a JSON summary (with the load average) at the end. kwok runs
beside the control plane (the simulated cloud's Nodes: ``simcrash``, ``drains``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from karpenter.sandbox import kwok
from karpenter.sandbox.controlplane import LocalControlPlane, ensure_binaries
from tests.e2e.conftest import ControlPlane, install_crds
from tests.faults import audit, cpfaults, crash, drains, ec2faults, failover, simcrash
from tests.faults import aws as fa


async def _crash(plane: ControlPlane, url: str, args: argparse.Namespace, work: Path) -> Any:
    report = await crash.campaign(plane, url, args.trials, args.seed, work)
    restarts = [t.restart_s for t in report.trials]
    return report.totals() | {
        "leak_wait_s": round(report.leak_wait_s, 1),
        "instances_launched": report.instances_launched,
        "claims_created": sum(t.claims_created for t in report.trials),
        "restart_s_median": round(statistics.median(restarts), 1),
        "per_phase": {p: sum(1 for t in report.trials if t.phase == p) for p in crash.PHASES},
    }


async def _simcrash(plane: ControlPlane, _: str, args: argparse.Namespace, work: Path) -> Any:
    report = await simcrash.campaign(plane, args.trials, args.seed, work)
    restarts = [t.restart_s for t in report.trials]
    return report.totals() | {
        "leak_wait_s": round(report.leak_wait_s, 1),
        "claims_created": sum(t.claims_created for t in report.trials),
        "instances_launched": sum(t.instances_launched for t in report.trials),
        "restart_s_median": round(statistics.median(restarts), 1),
        "restart_s_max": round(max(restarts), 1),
        "per_phase": {p: sum(1 for t in report.trials if t.phase == p) for p in simcrash.PHASES},
        "controller_starts": report.controller_starts,
        "leak_names": report.leaks,
        "orphan_node_names": report.orphan_nodes,
        "problem_trials": [
            vars(t) for t in report.trials if t.duplicates or t.never_running or t.stuck
        ],
    }


async def _ec2(plane: ControlPlane, url: str, args: argparse.Namespace, work: Path) -> Any:
    rows = []
    for i in range(args.trials):
        rates = {
            api: {fault: min(p * args.rate_scale, 0.9) for fault, p in faults.items()}
            for api, faults in ec2faults.DEFAULT_RATES.items()
        }
        r = await ec2faults.experiment(plane, url, work, seed=args.seed + i, rates=rates)
        rows.append(ec2faults.summary(r) | {
            "placed_s": round(r.placed_s, 1),
            "ice_log_lines": r.ice_log_lines,
            "hidden_offerings": r.ice_metric,
            "peak_calls_per_min": max(r.peak_per_minute.values()),
            "peak_api": max(r.peak_per_minute, key=lambda k: r.peak_per_minute[k]),
            "injected_by_kind": r.injected,
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


async def _failover(plane: ControlPlane, url: str, args: argparse.Namespace, work: Path) -> Any:
    out: dict[str, Any] = {}
    for how in (signal.SIGKILL, signal.SIGTERM):
        times, overlaps = [], 0
        for _ in range(args.trials):
            r = await failover.one_round(plane, how, work)
            times.append(r.failover_s)
            overlaps += len(r.overlaps)
            print(how.name, round(r.failover_s, 2), r.overlaps, flush=True)
        out[how.name] = {
            "rounds": len(times),
            "failover_s_min": round(min(times), 2),
            "failover_s_median": round(statistics.median(times), 2),
            "failover_s_max": round(max(times), 2),
            "overlapping_writes": overlaps,
        }
    return out


async def _controlplane(plane: ControlPlane, url: str, args: argparse.Namespace, _: Path) -> Any:
    rows = []
    for _i in range(args.trials):
        r = await cpfaults.experiment(plane)
        rows.append({
            "duplicates": r.duplicates, "lost_deletions": len(r.lost_deletions),
            "unplaced": r.unplaced, "relists": r.relists, "bumps": r.bumps,
            "compacted_history_gone": r.gone_410,
        })  # fmt: skip
    return rows


async def _drains(plane: ControlPlane, url: str, args: argparse.Namespace, _: Path) -> Any:
    rows = []
    for i in range(args.trials):
        r = await drains.experiment(plane, args.seed + i, count=5)
        rows.append({
            "seed": r.seed, "workloads": [f"{w.replicas}x {w.pdb}" for w in r.workloads],
            "breaches": len(r.breaches), "never_back": len(r.never_back),
            "dnd_early": len(r.dnd_early), "dnd_forced_at_deadline": r.dnd_forced,
            "terminating_seen": r.terminating_seen, "grace_cut": len(r.grace_cut),
            "grace_not_honoured": len(r.grace_not_honoured),
            "claims_terminated": r.claims_deleted, "pods_evicted_or_drained": r.evictions_seen,
            "samples": r.samples,
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds the context managers: the control plane is stopped


RUNS = {
    "crash": _crash,
    "simcrash": _simcrash,
    "ec2": _ec2,
    "failover": _failover,
    "controlplane": _controlplane,
    "drains": _drains,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=sorted(RUNS))
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate-scale", type=float, default=1.0, help="ec2: fault rates x this")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    work = Path(tempfile.mkdtemp(prefix=f"faults-{args.experiment}-"))
    start = time.monotonic()
    with (
        LocalControlPlane(
            ensure_binaries(),
            work / "plane",
            audit_policy=audit.POLICY,
            kwok=kwok.KwokOptions(kwok.ensure_kwok()),
        ) as local,
        fa.moto_server() as url,
    ):
        anyio.run(install_crds, local.kubeconfig)
        plane = ControlPlane(local.kubeconfig, local.server, local)
        result = anyio.run(RUNS[args.experiment], plane, url, args, work)
    summary = {
        "experiment": args.experiment,
        "trials": args.trials,
        "seed": args.seed,
        "rate_scale": args.rate_scale,
        "result": result,
        "wall_s": round(time.monotonic() - start, 1),
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "logs": str(work),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
