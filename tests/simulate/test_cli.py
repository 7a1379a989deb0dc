"""`karpenter simulate` end to end: the JSON contract on the examples, and bad input."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from karpenter import cli
from karpenter.simulate import runner

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def simulate(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter", "simulate", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, **env} if env else None,
    )


def doc(path: str, **env: str) -> dict:  # type: ignore[type-arg]
    """The JSON document for an example, with ``env`` added to the environment."""
    result = simulate(str(EXAMPLES / path), "--output", "json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_contract_shape() -> None:
    """The provisioning document has exactly the contract's keys and a consistent price."""
    out = doc("webapp-zonal-spread.yaml")
    assert set(out) == {"nodeClaims", "existingNodes", "unschedulable", "pricePerHour", "cost"}
    assert set(out["cost"]) == {"perHour", "lowerBoundPerHour", "ratio"}
    assert out["cost"]["perHour"] == out["pricePerHour"]
    assert 0 < out["cost"]["lowerBoundPerHour"] <= out["pricePerHour"]
    claim = out["nodeClaims"][0]
    assert set(claim) == {"name", "nodePool", "instanceTypes", "launch", "labels", "taints", "pods"}
    assert claim["name"] == "simulated-1"
    assert claim["labels"]["kubernetes.io/hostname"] == "simulated-1"
    assert claim["labels"]["karpenter.sh/nodepool"] == "default"
    assert claim["launch"]["instanceType"] == claim["instanceTypes"][0]
    assert out["pricePerHour"] == pytest.approx(
        sum(c["launch"]["price"] for c in out["nodeClaims"])
    )


def test_cost_policy_is_read_and_checked() -> None:
    """COST_POLICY=firstfit gives upstream's dearer fleet; a bad value exits 2 naming it."""
    example = str(EXAMPLES / "cost-optimal-fleet.yaml")
    best = doc("cost-optimal-fleet.yaml")
    slow = doc("cost-optimal-fleet.yaml", COST_POLICY="firstfit")
    assert best["cost"]["lowerBoundPerHour"] == slow["cost"]["lowerBoundPerHour"]
    assert best["pricePerHour"] < slow["pricePerHour"]
    assert best["cost"]["ratio"] < slow["cost"]["ratio"]
    bad = simulate(example, env={"COST_POLICY": "cheapest"})
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "COST_POLICY" in bad.stderr


def test_webapp_spreads_over_three_zones() -> None:
    """Six replicas with a zonal spread of skew 1 land two per zone."""
    out = doc("webapp-zonal-spread.yaml")
    zones = [c["launch"]["zone"] for c in out["nodeClaims"] for _ in c["pods"]]
    assert sorted(zones) == ["test-zone-1"] * 2 + ["test-zone-2"] * 2 + ["test-zone-3"] * 2


def test_gpu_pool_limit_and_taint() -> None:
    """Trainers go to the tainted GPU pool until its CPU limit; the API pod to general."""
    out = doc("gpu-pool.yaml")
    pools = {p: c["nodePool"] for c in out["nodeClaims"] for p in c["pods"]}
    assert pools["default/api-1"] == "general"
    assert pools["ml/trainer-1"] == pools["ml/trainer-2"] == "gpu"
    assert out["unschedulable"] == [
        {
            "pod": "ml/trainer-3",
            "reason": "NodePool gpu: limits cpu=8 exceeded; NodePool general: no instance type "
            "has 8Gi memory; largest allocatable is 7.13Gi",
        }
    ]
    gpu = next(c for c in out["nodeClaims"] if c["nodePool"] == "gpu")
    assert gpu["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]


def test_spot_on_demand_mix() -> None:
    """On-demand-only pods use the on-demand pool; others prefer the heavier spot pool."""
    out = doc("spot-ondemand-mix.yaml")
    by_pod = {p: c for c in out["nodeClaims"] for p in c["pods"]}
    assert by_pod["default/payments-1"]["launch"]["capacityType"] == "on-demand"
    assert by_pod["default/batch-2"]["nodePool"] == "spot"
    assert out["existingNodes"] == [{"name": "existing-1", "pods": ["default/batch-1"]}]


def test_cannot_fit_reasons() -> None:
    """Pods that cannot be placed are listed with actionable reasons; the run still exits 0."""
    out = doc("cannot-fit.yaml")
    reasons = {u["pod"]: u["reason"] for u in out["unschedulable"]}
    assert reasons == {
        "default/big-1": "no instance type has 200 cpu; largest allocatable is 95.9",
        "default/spot-only": "incompatible with NodePool default: requirement "
        "karpenter.sh/capacity-type In [spot] vs NodePool NotIn [spot]",
    }


def test_table_output() -> None:
    """--output table prints a summary for people."""
    result = simulate(str(EXAMPLES / "cannot-fit.yaml"), "--output", "table")
    assert "cannot be scheduled" in result.stdout and result.returncode == 0


POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"
CATALOG = (
    "apiVersion: simulation.karpenter.sh/v1alpha1\nkind: InstanceTypeCatalog\n"
    "metadata: {name: c}\nspec: {preset: fake, count: 4}\n"
)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param(
            "kind: Foo\n", "document 2 (Foo): kind: unknown kind 'Foo'", id="unknown-kind"
        ),
        pytest.param(
            "apiVersion: v2\nkind: Pod\nmetadata: {name: p}\n",
            "document 2 (Pod p): apiVersion: Pod needs v1",
            id="wrong-api-version",
        ),
        pytest.param(
            POD.replace("[{name: c}]", "[{name: c, resources: {requests: {cpu: abc}}}]"),
            "spec.containers[0].resources.requests.cpu: invalid quantity 'abc'",
            id="bad-quantity",
        ),
        pytest.param(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n"
            "  template: {spec: {requirements: [{key: a, operator: Near, values: [x]}]}}\n",
            "spec.template.spec.requirements[0]",
            id="bad-operator",
        ),
        pytest.param(POD + "---\n" + POD, "metadata.name: duplicate Pod", id="duplicate"),
        pytest.param("a: [1,\n", "invalid YAML", id="bad-yaml"),
        pytest.param(
            "apiVersion: simulation.karpenter.sh/v1alpha1\nkind: InstanceTypeCatalog\n"
            "spec: {preset: aws, region: nowhere-1}\n",
            "no EC2 data",
            id="aws-preset-unknown-region",
        ),
        pytest.param(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n"
            "  disruption: {budgets: [{nodes: '150%'}]}\n",
            "spec.disruption.budgets[0]",
            id="bad-budget",
        ),
        pytest.param(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n"
            "  template: {metadata: {labels: {kubernetes.io/hostname: x}}}\n",
            "restricted",
            id="restricted-label",
        ),
        pytest.param(
            POD.replace("spec: {", "spec: {tolerations: [{key: a, operator: Near}], "),
            "spec.tolerations[0].operator",
            id="bad-toleration",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(text: str, fragment: str) -> None:
    """Bad input exits 2 with one line naming the document and field, never a traceback."""
    result = simulate("-", stdin=CATALOG + "---\n" + text if "aws" not in fragment else text)
    assert result.returncode == cli.EXIT_BAD_INPUT
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_the_solve_collects_rarely_and_thresholds_are_restored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The solve runs under the simulation's collector thresholds and the process's own are
    back once it is done, the document unchanged."""
    seen: list[tuple[int, int, int]] = []
    real = runner.provisioning

    def provisioning(*args: Any, **kw: Any) -> object:
        seen.append(gc.get_threshold())
        return real(*args, **kw)

    monkeypatch.setattr(runner, "provisioning", provisioning)
    before = gc.get_threshold()
    example = str(EXAMPLES / "webapp-zonal-spread.yaml")
    try:
        code = cli.main(["simulate", example, "--output", "json"])
    finally:
        gc.unfreeze()  # the command freezes its snapshot for the rest of its process
    assert code == 0
    assert seen == [cli.SOLVE_GC_THRESHOLDS]
    assert gc.get_threshold() == before
    assert json.loads(capsys.readouterr().out) == doc("webapp-zonal-spread.yaml")


def test_mixing_hedge_is_shown_and_can_be_turned_off() -> None:
    """aws-realistic's small c6a.large claim could receive the pass's memory-heavy pods: the
    controller (and simulate, which runs its pass) launches it as an m6a.large and says so;
    FEATURE_GATES=MixingHedge=false prints the cheapest plan."""
    hedged = doc("aws-realistic.yaml")
    plain = doc("aws-realistic.yaml", FEATURE_GATES="MixingHedge=false")
    changed = [
        (p, h)
        for p, h in zip(plain["nodeClaims"], hedged["nodeClaims"], strict=True)
        if p["launch"] != h["launch"]
    ]
    assert len(changed) == 1
    before, after = changed[0]
    assert after["pods"] == before["pods"]
    assert after["launch"]["hedgedFrom"] == before["launch"]["instanceType"] == "c6a.large"
    assert after["launch"]["instanceType"] == after["instanceTypes"][0] == "m6a.large"
    assert "hedgedFrom" not in before["launch"]
    assert plain["pricePerHour"] < hedged["pricePerHour"]
