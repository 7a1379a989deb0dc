"""`karpenter simulate --disruption` end to end on the examples: the contract and the table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NOW = "2026-11-23T00:00:00Z"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter", "simulate", "--disruption", "--now", NOW, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def disruption(name: str) -> dict[str, Any]:
    result = run(str(EXAMPLES / name), "--output", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_consolidation_example() -> None:
    out = disruption("consolidation.yaml")
    assert {"commands", "pricePerHourBefore", "pricePerHourAfter"} <= set(out)
    first, second = out["commands"]
    assert (first["reason"], first["nodes"], first["replacements"]) == ("Empty", ["node-empty"], [])
    assert second["reason"] == "Underutilized"
    assert second["nodes"] == ["node-a", "node-b", "node-busy"]
    (replacement,) = second["replacements"]
    assert replacement["name"] == "simulated-1"
    assert replacement["launch"]["capacityType"] == "on-demand"
    assert set(replacement) >= {"name", "nodePool", "instanceTypes", "launch", "labels", "pods"}
    moved = {m["pod"]: m["node"] for m in second["podsMoved"]}
    assert sorted(moved) == sorted(
        [f"default/web-{n}" for n in ("a1", "a2", "b1", "b2")]
        + [f"default/api-{i}" for i in range(5)]
    )
    assert set(replacement["pods"]) == {k for k, v in moved.items() if v == "simulated-1"}
    # The guarded nodes stay, and say why.
    blocked = {b["node"]: b["reason"] for b in out["blocked"]}
    assert "do-not-disrupt" in blocked["node-protected"]
    assert "PodDisruptionBudget default/db" in blocked["node-pdb"]
    saved = sum(c["savingsPerHour"] for c in out["commands"])
    assert out["pricePerHourBefore"] - out["pricePerHourAfter"] == pytest.approx(saved, abs=1e-5)


def test_drift_example_replaces_each_drifted_node_once() -> None:
    out = disruption("drift.yaml")
    assert [(c["reason"], c["nodes"]) for c in out["commands"]] == [
        ("Drifted", ["node-retired"]),
        ("Drifted", ["node-spot"]),
        ("Drifted", ["node-template"]),
    ]
    for i, command in enumerate(out["commands"], 1):
        (replacement,) = command["replacements"]
        assert replacement["name"] == f"simulated-{i}"
        assert replacement["labels"]["karpenter.sh/capacity-type"] == "on-demand"
        assert replacement["labels"]["team"] == "web"


def test_provisioning_examples_have_nothing_to_disrupt() -> None:
    out = disruption("webapp-zonal-spread.yaml")
    assert out["commands"] == []
    assert out["pricePerHourBefore"] == out["pricePerHourAfter"]


def test_table_output() -> None:
    result = run(str(EXAMPLES / "consolidation.yaml"), "--output", "table")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["#", "REASON", "SAVINGS/H", "NODES", "->", "REPLACEMENTS"]
    assert "Empty" in lines[1] and "node-empty -> (delete)" in lines[1]
    assert "simulated-1 (fake-it-3 on-demand)" in lines[2]
    assert any(line.startswith("2 command(s);") for line in lines)


def test_expiration_uses_now() -> None:
    # With --now a year later every node has passed its 720h expireAfter.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "karpenter",
            "simulate",
            "--disruption",
            "--now",
            "2027-11-23T00:00:00Z",
            str(EXAMPLES / "drift.yaml"),
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {c["reason"] for c in out["commands"]} == {"Expired"}
    assert sorted(n for c in out["commands"] for n in c["nodes"]) == [
        "node-current",
        "node-retired",
        "node-spot",
        "node-template",
    ]
