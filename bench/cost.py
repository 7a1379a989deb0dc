"""Fleet price benchmark: first fit vs. the cost pass vs. the lower bound, on the aws preset.

Realistic mixed workloads on the real us-east-1 catalogue (c/m/r families, generation > 5,
amd64, on-demand), each with a DaemonSet and zone-spread Deployments of several shapes, some
with hostname anti-affinity. Prices come from the shared on-demand snapshot. For each workload
this prints the first-fit price, the cost pass's price, the lower bound and the ratios, and the
CPU seconds of both passes (process time, so other load on the machine counts less).

Run: ``python bench/cost.py [--workloads a,b] [--scale 1,2,4]``;
``python bench/cost.py --emit NAME > file.yaml`` writes a workload for ``karpenter simulate``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.simulate import loader

PRICES = Path("/work/shared/data/ec2-on-demand-prices.json")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

# (app, replicas, cpu, memory, rule): rule is "zone" (spread, skew 1), "host" (one per node)
# or "" (no constraint)
Deployment = tuple[str, int, str, str, str]
WORKLOADS: dict[str, list[Deployment]] = {
    "web-mixed": [
        ("web", 120, "500m", "1Gi", "zone"),
        ("api", 45, "2", "4Gi", "zone"),
        ("cache", 24, "1", "12Gi", "zone"),
        ("batch", 30, "4", "6Gi", "zone"),
        ("worker", 90, "250m", "512Mi", "zone"),
    ],
    "memory-heavy": [
        ("jvm", 60, "1", "6Gi", "zone"),
        ("web", 90, "500m", "768Mi", "zone"),
        ("redis", 18, "2", "26Gi", "zone"),
        ("etl", 24, "3", "5Gi", "zone"),
    ],
    "cpu-heavy": [
        ("encoder", 80, "3", "2Gi", "zone"),
        ("web", 150, "250m", "384Mi", "zone"),
        ("ml", 12, "8", "30Gi", "zone"),
        ("queue", 40, "1", "3Gi", "zone"),
    ],
    "microservices": [
        *(
            (f"svc{i}", 12 + 3 * i, f"{100 + 50 * i}m", f"{128 + 96 * i}Mi", "zone")
            for i in range(12)
        ),
        ("gateway", 9, "1", "1Gi", "host"),
        ("cron", 40, "200m", "256Mi", ""),
    ],
    "data-platform": [
        ("executor", 64, "4", "28Gi", "zone"),
        ("driver", 8, "1", "4Gi", "zone"),
        ("kafka", 6, "2", "8Gi", "host"),
        ("api", 36, "1500m", "3Gi", "zone"),
        ("sidecar", 80, "100m", "200Mi", ""),
    ],
}


def _pod(app: str, index: int, cpu: str, memory: str, rule: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": app, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ]
    }
    selector = {"matchLabels": {"app": app}}
    if rule == "zone":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ]
    elif rule == "host":
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOST, "labelSelector": selector}
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{app}-{index}", "namespace": "shop", "labels": {"app": app}},
        "spec": spec,
    }


def documents(name: str, scale: float = 1.0) -> list[dict[str, Any]]:
    """The workload's documents (replica counts multiplied by ``scale``)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "simulation.karpenter.sh/v1alpha1",
            "kind": "InstanceTypeCatalog",
            "spec": {"preset": "aws", "region": "us-east-1", "priceFile": str(PRICES)},
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "general"},
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [
                            {
                                "key": "karpenter.k8s.aws/instance-category",
                                "operator": "In",
                                "values": ["c", "m", "r"],
                            },
                            {
                                "key": "karpenter.k8s.aws/instance-generation",
                                "operator": "Gt",
                                "values": ["5"],
                            },
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand"],
                            },
                        ]
                    }
                }
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "node-agent", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "node-agent"}},
                "template": {
                    "metadata": {"labels": {"app": "node-agent"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "a",
                                "image": "agent",
                                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}},
                            }
                        ]
                    },
                },
            },
        },
    ]
    for app, replicas, cpu, memory, rule in WORKLOADS[name]:
        for i in range(max(1, round(replicas * scale))):
            docs.append(_pod(app, i, cpu, memory, rule))
    return docs


def run(name: str, scale: float) -> None:
    text = yaml.safe_dump_all(documents(name, scale))
    scenario = loader.load(["-"], text)
    pods = scenario.pending
    start = time.process_time()
    first = solve(scenario.cluster, pods, Options(cost_policy="firstfit"))
    middle = time.process_time()
    best = solve(scenario.cluster, pods, Options(), bound=True)
    end = time.process_time()
    bound = best.lower_bound or 0.0
    print(
        f"| {name} | {scale:g} | {len(pods)} | {first.price:.4f} | {best.price:.4f} | {bound:.4f} |"
        f" {first.price / bound:.3f} | {best.price / bound:.3f} | {len(first.new_claims)} →"
        f" {len(best.new_claims)} | {len(first.unschedulable)}/{len(best.unschedulable)} |"
        f" {middle - start:.2f} | {end - middle:.2f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--scale", default="1")
    parser.add_argument("--emit", default="")
    args = parser.parse_args()
    if args.emit:
        yaml.safe_dump_all(documents(args.emit), sys.stdout)
        return
    print(
        "| workload | scale | pods | first fit $/h | cost pass $/h | lower bound $/h |"
        " first fit ÷ bound | cost pass ÷ bound | nodes | unschedulable ff/cp |"
        " first fit cpu s | cost pass + bound cpu s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for scale in (float(s) for s in args.scale.split(",")):
        for name in args.workloads.split(","):
            run(name, scale)


if __name__ == "__main__":
    main()
