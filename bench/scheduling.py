"""Scheduling benchmark: upstream Karpenter's workload (400 fake types, diverse pod mixes).

Reproduces the pod mixes of upstream's scheduling benchmark (generic, zonal spread, hostname
spread, zonal self-affinity, hostname anti-affinity in equal fifths; and the 4000-pod preference
mix) with a seeded RNG, runs one provisioning pass per size and prints solve time, pods/s, nodes,
fleet price and price ÷ a cost lower bound (max over resources of Σ requests × the cheapest price
per unit of allocatable). Run: ``python bench/scheduling.py [--sizes 1,50,...]``.
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from dataclasses import replace

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import (
    Pod,
    PodAffinityTerm,
    TopologySpread,
    WeightedAffinityTerm,
    WeightedNodeTerm,
)
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.scheduling.selectors import LabelSelector

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
CPUS = ("100m", "250m", "500m", "1000m", "1500m")
MEMS = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")
LETTERS = "abcdefg"


class Maker:
    """Seeded pod factory (upstream seeds its RNG with 42)."""

    def __init__(self) -> None:
        self.rng = random.Random(42)
        self.n = 0

    def pod(self, labels: dict[str, str], **kw: object) -> Pod:
        self.n += 1
        requests = res.parse(
            {"cpu": self.rng.choice(CPUS), "memory": self.rng.choice(MEMS), "pods": 1}
        )
        return Pod(
            "default",
            f"pod-{self.n}",
            uid=f"{self.n:08d}",
            labels=labels,
            requests=requests,
            creation=float(self.n),
            **kw,  # type: ignore[arg-type]
        )

    def diverse(self, count: int) -> list[Pod]:
        fifth = count // 5
        pods = [self.pod({}) for _ in range(count - 4 * fifth)]
        for key in (ZONE, HOST):
            for _ in range(fifth):
                value = self.rng.choice(LETTERS)
                sel = LabelSelector((("my-label", value),))
                pods.append(
                    self.pod(
                        {"my-label": value}, topology_spread=(TopologySpread(key, 1, selector=sel),)
                    )
                )
        for _ in range(fifth):
            value = self.rng.choice(LETTERS)
            term = PodAffinityTerm(ZONE, LabelSelector((("my-affininity", value),)))
            pods.append(self.pod({"my-affininity": value}, required_affinity=(term,)))
        anti = PodAffinityTerm(HOST, LabelSelector((("app", "nginx"),)))
        pods.extend(
            self.pod({"app": "nginx"}, required_anti_affinity=(anti,)) for _ in range(fifth)
        )
        return pods

    def preference(self, count: int) -> list[Pod]:
        zone_pref = WeightedNodeTerm(1, ((ZONE, "In", ("test-zone-1",), None),))
        sel = LabelSelector((("app", "nginx"),))
        anti = (
            WeightedAffinityTerm(10, PodAffinityTerm(ZONE, sel)),
            WeightedAffinityTerm(1, PodAffinityTerm(HOST, sel)),
        )
        return [
            self.pod(
                {"app": "nginx"}, preferred_node_terms=(zone_pref,), preferred_anti_affinity=anti
            )
            for _ in range(count)
        ]


def lower_bound(pods: list[Pod], types: tuple[InstanceType, ...]) -> float:
    """max over cpu/memory of Σ requests × the cheapest price per unit of allocatable."""
    bound = 0.0
    for name in (res.CPU, res.MEMORY):
        total = sum(p.requests.get(name, 0) for p in pods)
        per_unit = min(
            min(o.price for o in t.offerings) / t.allocatable[name]
            for t in types
            if t.allocatable.get(name)
        )
        bound = max(bound, total * per_unit)
    return bound


def run(label: str, pods: list[Pod], options: Options) -> None:
    types = fake_instance_types(400)
    pool = NodePool("default", limits=res.parse({"cpu": 10_000_000, "memory": "10000000Gi"}))
    cluster = Cluster(nodepools=(pool,), instance_types={"default": types})
    start = time.perf_counter()
    cpu = time.process_time()
    results = solve(cluster, pods, options)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    bound = lower_bound(pods, types)
    print(
        f"| {label} | {len(pods)} | {elapsed:.3f} | {cpu:.3f} | {len(pods) / elapsed:,.0f} | "
        f"{len(results.new_claims)} | {len(results.unschedulable)} | {results.price:,.2f} | "
        f"{results.price / bound if bound else 0:.3f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,50,100,500,1000,2000,5000,10000,20000")
    parser.add_argument("--no-preferences", action="store_true")
    parser.add_argument("--cost-policy", default="optimal", choices=("optimal", "firstfit"))
    args = parser.parse_args()
    base = Options(cost_policy=args.cost_policy)
    print(
        "| mix | pods | solve s | cpu s | pods/s | nodes | unschedulable | price $/h |"
        " price ÷ bound |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        run("diverse", Maker().diverse(size), base)
    if not args.no_preferences:
        run("preference (Respect)", Maker().preference(4000), base)
        ignore = replace(base, preference_policy="Ignore")
        run("preference (Ignore)", Maker().preference(4000), ignore)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
