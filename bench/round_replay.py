"""Replay a consolidation round offline: is what one round of commands leaves enough for the pods?

``bench/perf_suite.py`` dumps the cluster 40 s into its consolidation phase. This script rebuilds
the cluster as the controller's first round saw it (the round's replacement NodeClaims and
their Nodes dropped, the candidates' disrupted taints and deletion marks cleared, the pods the
evictions recreated dropped and the evicted ones put back), then decides a round as
``controllers/disruption.py`` does: each command with the earlier ones of the round marked as
in flight (``validation.as_in_flight``), until a pass finds nothing. It prints the commands and,
for the nodes the round leaves plus its replacements, the allocatable CPU against the CPU the
pods request: a round whose commands each counted on the same free room leaves less than the
pods need, and the provisioner buys nodes for the evicted pods left pending.

    python3 bench/round_replay.py RUN/basic-ours/dump-basic-ours-consolidation-40s.yaml \
        RUN/basic-ours/controller-ours.log
"""

from __future__ import annotations

import argparse
import copy
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from karpenter.core.disruption.commands import Command
from karpenter.core.disruption.planner import decide
from karpenter.core.disruption.validation import as_in_flight
from karpenter.core.model import resources as res
from karpenter.settings import Settings
from karpenter.simulate import loader

REPO = Path(__file__).resolve().parent.parent
CATALOG = REPO / "bench" / "kwok_catalog.yaml"
REPLACEMENT_OF = "karpenter.sh/disruption-replacement-of"
COMMAND = "karpenter.sh/disruption-command"
DISRUPTED = "karpenter.sh/disrupted"


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def round_start(log: Path) -> float:
    """When the controller logged its first disruption command (seconds since the epoch)."""
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("message") == "disrupting":
            return _epoch(str(entry["time"]))
    raise SystemExit(f"{log}: no 'disrupting' line")


def before_round(objects: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """The dumped objects as they were when the round was decided (``start``: its first
    command; the round's commands were all decided within a few seconds of it)."""
    replacements = set()
    for obj in objects:
        notes = obj["metadata"].get("annotations") or {}
        if obj["kind"] == "NodeClaim" and REPLACEMENT_OF in notes:
            replacements.add((obj.get("status") or {}).get("nodeName", ""))
    out = []
    for original in objects:
        obj = copy.deepcopy(original)
        meta = obj["metadata"]
        notes = meta.get("annotations") or {}
        if obj["kind"] == "NodeClaim" and REPLACEMENT_OF in notes:
            continue
        if obj["kind"] == "Node" and meta["name"] in replacements:
            continue
        if obj["kind"] == "Pod":
            if _epoch(meta["creationTimestamp"]) >= start - 2.0:
                continue  # recreated by its controller after an eviction of the round
            meta.pop("deletionTimestamp", None)
            meta.pop("deletionGracePeriodSeconds", None)
        if obj["kind"] == "Node":
            taints = obj["spec"].get("taints", [])
            obj["spec"]["taints"] = [t for t in taints if t["key"] != DISRUPTED]
            meta.pop("deletionTimestamp", None)
        if obj["kind"] == "NodeClaim":
            meta.pop("deletionTimestamp", None)
            notes.pop(COMMAND, None)
        out.append(obj)
    return out


def _cpu(resources: res.Resources) -> float:
    return resources.get(res.CPU, 0) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump", type=Path, help="a dump taken during the round's drains")
    parser.add_argument("log", type=Path, help="the controller's log of that run")
    parser.add_argument("--work", type=Path, default=Path("/tmp/round-replay.yaml"))
    args = parser.parse_args()
    start = round_start(args.log)
    objects: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(args.dump.read_text()):
        if doc:
            objects += doc.get("items", [doc])
    args.work.write_text(yaml.safe_dump_all(before_round(objects, start), sort_keys=False))
    cluster = loader.load([str(args.work), str(CATALOG)]).cluster
    options = Settings().core_options()
    print(f"before the round: {len(cluster.nodes)} nodes, {len(cluster.pods)} pods")
    commands: list[Command] = []
    while True:
        marked = [name for command in commands for name in command.names]
        command, _ = decide(as_in_flight(cluster, marked), options, start)
        if command is None:
            break
        commands.append(command)
        kinds = [r.launch.instance_type for r in command.replacements]
        print(f"  {command.method} {command.decision}: {len(command.names)} nodes -> {kinds}")
    gone = {name for command in commands for name in command.names}
    left = [n for n in cluster.nodes if n.name not in gone]
    added = [
        next(it for it in r.instance_types if it.name == r.launch.instance_type)
        for command in commands
        for r in command.replacements
    ]
    room = sum(_cpu(n.allocatable) for n in left) + sum(_cpu(it.allocatable) for it in added)
    need = sum(_cpu(p.requests) for p in cluster.pods if p.is_active() and not p.is_daemonset_pod())
    print(
        f"after the round: {len(left) + len(added)} nodes, {room:.1f} allocatable CPUs, "
        f"pods request {need:.1f}"
    )


if __name__ == "__main__":
    main()
