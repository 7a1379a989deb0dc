"""`karpenter simulate` on the aws preset: a realistic workload placed on real EC2 types."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from karpenter.core.model.quantity import MILLI
from karpenter.providers.aws import preset as awspreset
from karpenter.providers.aws.settings import AWSSettings

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "aws-realistic.yaml"
PRICES = Path("/work/shared/data/ec2-on-demand-prices.json")


def run(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "karpenter", "simulate", *args, "--output", "json"],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def simulate(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> Any:
    return run(*args, env=env, stdin=stdin)[0]


@pytest.mark.skipif(not PRICES.exists(), reason="the shared us-east-1 price snapshot is absent")
def test_realistic_workload_on_real_types_with_price_file() -> None:
    """Web, API, cache and GPU pods all land on real us-east-1 types priced from the file."""
    # first fit (upstream's packing): the two training pods share one multi-GPU node
    out = simulate(str(EXAMPLE), env={"AWS_PRICE_FILE": str(PRICES), "COST_POLICY": "firstfit"})
    prices = json.loads(PRICES.read_text())["onDemand"]["us-east-1"]
    assert out["unschedulable"] == []
    placed = sorted(p for c in out["nodeClaims"] for p in c["pods"])
    assert len(placed) == 35
    for claim in out["nodeClaims"]:
        launch = claim["launch"]
        assert launch["price"] == prices[launch["instanceType"]]
        assert (
            claim["labels"]["karpenter.k8s.aws/instance-family"]
            == launch["instanceType"].split(".")[0]
        )
        assert claim["labels"]["topology.kubernetes.io/region"] == "us-east-1"
    gpu = next(c for c in out["nodeClaims"] if c["nodePool"] == "gpu")
    assert gpu["labels"]["karpenter.k8s.aws/instance-gpu-manufacturer"] == "nvidia"
    assert int(gpu["labels"]["karpenter.k8s.aws/instance-gpu-count"]) >= 2
    general = [c for c in out["nodeClaims"] if c["nodePool"] == "general"]
    for claim in general:
        assert claim["labels"]["karpenter.k8s.aws/instance-category"] in {"c", "m", "r"}
        assert int(claim["labels"]["karpenter.k8s.aws/instance-generation"]) > 5
    assert out["pricePerHour"] == pytest.approx(
        sum(c["launch"]["price"] for c in out["nodeClaims"])
    )


@pytest.mark.skipif(not PRICES.exists(), reason="the shared us-east-1 price snapshot is absent")
def test_cost_pass_is_cheaper_than_first_fit_on_the_realistic_workload() -> None:
    """The default cost pass places every pod on real types for less than first fit does."""
    env = {"AWS_PRICE_FILE": str(PRICES)}
    optimal = simulate(str(EXAMPLE), env=env)
    first = simulate(str(EXAMPLE), env={**env, "COST_POLICY": "firstfit"})
    prices = json.loads(PRICES.read_text())["onDemand"]["us-east-1"]
    assert optimal["unschedulable"] == []
    assert sorted(p for c in optimal["nodeClaims"] for p in c["pods"]) == sorted(
        p for c in first["nodeClaims"] for p in c["pods"]
    )
    assert optimal["pricePerHour"] < first["pricePerHour"]
    for claim in optimal["nodeClaims"]:
        assert claim["launch"]["price"] == prices[claim["launch"]["instanceType"]]
        if claim["nodePool"] == "gpu":
            assert claim["labels"]["karpenter.k8s.aws/instance-gpu-manufacturer"] == "nvidia"
            gpus = int(claim["labels"]["karpenter.k8s.aws/instance-gpu-count"])
            assert gpus >= len(claim["pods"])


def test_default_catalog_is_aws_for_region_with_estimates() -> None:
    """Without a catalog document the aws preset of AWS_REGION is used, priced by estimate."""
    scenario = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""
    out, stderr = run("-", env={"AWS_REGION": "eu-west-1", "AWS_PRICE_FILE": ""}, stdin=scenario)
    assert "karpenter: note: prices of " in stderr and "are estimates" in stderr
    claim = out["nodeClaims"][0]
    assert claim["labels"]["topology.kubernetes.io/region"] == "eu-west-1"
    assert claim["launch"]["zone"].startswith("eu-west-1")
    assert claim["launch"]["price"] > 0


def test_price_file_relative_to_scenario(tmp_path: Path) -> None:
    """priceFile is read relative to the scenario; its prices decide the launch."""
    (tmp_path / "prices.json").write_text(
        json.dumps({"onDemand": {"us-west-2": {"m5.large": 0.001, "c5.large": 0.5}}})
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        """
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceTypeCatalog
spec: {preset: aws, region: us-west-2, priceFile: prices.json}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, c5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""
    )
    out = simulate(str(scenario))
    assert out["nodeClaims"][0]["launch"] == {
        "instanceType": "m5.large",
        "zone": out["nodeClaims"][0]["launch"]["zone"],
        "capacityType": "on-demand",
        "price": 0.001,
    }


def test_pod_eni_requests_land_on_trunking_types(tmp_path: Path) -> None:
    """A pod asking for a pod-eni goes to m5.large (9 branch ENIs), never to the non-trunking t3
    types; asking for more than any allowed type has is unschedulable with the largest count."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        """
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceTypeCatalog
spec: {preset: aws, region: us-east-1}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
      - key: node.kubernetes.io/instance-type
        operator: In
        values: [m5.large, t3.medium, t3.large]
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: v1
kind: Pod
metadata: {name: sg, namespace: default}
spec:
  containers:
  - name: c
    image: x
    resources:
      requests: {cpu: 100m, memory: 128Mi, vpc.amazonaws.com/pod-eni: "1"}
      limits: {vpc.amazonaws.com/pod-eni: "1"}
---
apiVersion: v1
kind: Pod
metadata: {name: greedy, namespace: default}
spec:
  containers:
  - name: c
    image: x
    resources:
      requests: {cpu: 100m, memory: 128Mi, vpc.amazonaws.com/pod-eni: "10"}
      limits: {vpc.amazonaws.com/pod-eni: "10"}
"""
    )
    out = simulate(str(scenario), env={"AWS_PRICE_FILE": ""})
    assert [(c["instanceTypes"], c["pods"]) for c in out["nodeClaims"]] == [
        (["m5.large"], ["default/sg"])
    ]
    assert out["unschedulable"] == [
        {
            "pod": "default/greedy",
            "reason": "no instance type has 10 vpc.amazonaws.com/pod-eni; largest allocatable is 9",
        }
    ]


def test_preset_capacity_has_pod_eni() -> None:
    """The preset's m5.large offers 9 pod-eni (from the packaged table); t3.large offers none."""
    types = {t.name: t for t in awspreset.instance_types("us-east-1", "", AWSSettings())}
    assert types["m5.large"].capacity["vpc.amazonaws.com/pod-eni"] == 9 * MILLI
    assert "vpc.amazonaws.com/pod-eni" not in types["t3.large"].capacity
