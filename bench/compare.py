"""Whole ``karpenter simulate`` runs of this tree against another git ref, on the same inputs.

For each size, writes the benchmark scenario (``bench/scenario.py``: ``--pods`` for provisioning,
``--nodes`` for disruption), runs ``karpenter simulate`` once with the other ref's code (a
``git archive`` in a temporary directory) and once with this tree's, and prints a table: wall
time (and CPU time, which a shared machine disturbs less), peak RSS, and what decides whether
the change is safe — provisioning: NodeClaims, price, unschedulable pods; disruption: commands,
price before → after. "same doc" says whether the two JSON documents are identical. Exits 1
when a fleet differs (more nodes or a higher price).
Run from the repository root: ``python bench/compare.py --base main --pods 1000,5000``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOW = "2027-01-15T08:00:00Z"  # bench/disruption.py's clock


def _archive(ref: str, into: Path) -> None:
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)


def _simulate(code: Path, scenario: Path, disruption: bool) -> tuple[dict[str, Any], str, float]:
    """The JSON document, "wall s (CPU s)" and peak RSS (MiB) of one run."""
    args = [sys.executable, "-m", "karpenter", "simulate", str(scenario), "--output", "json"]
    if disruption:
        args += ["--disruption", "--now", NOW]
    env = {**os.environ, "PYTHONPATH": str(code)}
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, env=env, cwd=code)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"simulate failed under {code}")
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return json.load(out), f"{elapsed:.1f} ({cpu:.1f})", usage.ru_maxrss / 1024


def _summary(doc: dict[str, Any], disruption: bool) -> tuple[Any, ...]:
    if disruption:
        return (len(doc["commands"]), doc["pricePerHourBefore"], doc["pricePerHourAfter"])
    return (len(doc["nodeClaims"]), doc["pricePerHour"], len(doc["unschedulable"]))


def _worse(base: tuple[Any, ...], mine: tuple[Any, ...], disruption: bool) -> bool:
    if disruption:
        return bool(mine[2] > base[2] + 1e-6)
    return bool(mine[0] > base[0] or mine[1] > base[1] + 1e-6 or mine[2] > base[2])


def compare(base: Path, flag: str, size: int, scratch: Path) -> bool:
    """One row of the table; True when this tree's fleet is no worse."""
    disruption = flag == "--nodes"
    scenario = scratch / f"{flag[2:]}-{size}.yaml"
    with scenario.open("w") as out:
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "scenario.py"), flag, str(size)],
            stdout=out,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    doc_b, time_b, rss_b = _simulate(base, scenario, disruption)
    doc_m, time_m, rss_m = _simulate(ROOT, scenario, disruption)
    sum_b, sum_m = _summary(doc_b, disruption), _summary(doc_m, disruption)
    print(
        f"| {flag[2:]} | {size} | {time_b} / {time_m} | {rss_b:.0f} / {rss_m:.0f} | "
        f"{sum_b} | {sum_m} | {doc_b == doc_m} |",
        flush=True,
    )
    return not _worse(sum_b, sum_m, disruption)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", default="main", help="git ref to compare with")
    parser.add_argument("--pods", default="", help="comma-separated provisioning sizes")
    parser.add_argument("--nodes", default="", help="comma-separated disruption sizes")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f}")
    ref = args.base
    print(f"| mode | size | wall (CPU) s, {ref} / this | peak RSS MiB | {ref} | this | same doc |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        _archive(args.base, base)
        for flag, sizes in (("--pods", args.pods), ("--nodes", args.nodes)):
            for size in (int(s) for s in sizes.split(",") if s):
                ok &= compare(base, flag, size, Path(tmp))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
