"""Disruption benchmark: 1000 managed nodes with 10k pods, 30% of the nodes underutilized.

Builds a seeded cluster on the `fake` catalogue (400 types): 700 right-sized nodes (the
cheapest type that holds their pods) and 300 oversized ones (their pods use under a third of
them), on-demand and spot mixed, pods of upstream's benchmark shapes. Then runs the full
disruption plan (every command, each applied before the next) and prints the time, the
commands by method and the hourly price before and after.
Run: ``python bench/disruption.py [--nodes 1000] [--pods-per-node 10]``.
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from collections import Counter

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.disruption.planner import plan
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod

CPUS = ("100m", "250m", "500m", "1000m", "1500m")
MEMS = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")
NOW = 1_800_000_000.0


def _cheapest_fit(types: list[InstanceType], need: dict[str, int], factor: float) -> InstanceType:
    scaled = {k: int(v * factor) for k, v in need.items()}
    for it in types:
        if res.fits(scaled, it.allocatable):
            return it
    return types[-1]


def build(nodes: int, pods_per_node: int, underutilized: float, seed: int = 42) -> Cluster:
    """The benchmark cluster (deterministic for a seed)."""
    rng = random.Random(seed)
    types = list(fake_instance_types(400))
    by_price = sorted(types, key=lambda it: min(o.price for o in it.offerings))
    node_list: list[Node] = []
    pod_list: list[Pod] = []
    n_pod = 0
    for i in range(nodes):
        oversized = i < int(nodes * underutilized)
        count = max(1, pods_per_node // 3) if oversized else pods_per_node + rng.randint(-2, 2)
        shapes = [
            res.parse({"cpu": rng.choice(CPUS), "memory": rng.choice(MEMS), "pods": 1})
            for _ in range(count)
        ]
        need = res.add(*shapes)
        it = _cheapest_fit(by_price, need, 3.5 if oversized else 1.0)
        offering = rng.choice(it.offerings)
        name = f"node-{i:04d}"
        labels = {
            lbl.HOSTNAME: name,
            lbl.NODEPOOL: "default",
            lbl.INITIALIZED: "true",
            lbl.REGISTERED: "true",
            lbl.INSTANCE_TYPE: it.name,
            lbl.ZONE: offering.zone,
            lbl.CAPACITY_TYPE: offering.capacity_type,
            **it.requirements.single_values(),
        }
        node_list.append(
            Node(
                name,
                labels,
                {},
                (),
                dict(it.capacity),
                it.allocatable,
                provider_id=f"fake://{name}",
                creation=NOW - 3600,
            )
        )
        for shape in shapes:
            n_pod += 1
            pod_list.append(
                Pod(
                    "default",
                    f"pod-{n_pod}",
                    uid=f"{n_pod:08d}",
                    labels={"app": f"a{n_pod % 50}"},
                    requests=shape,
                    node_name=name,
                    phase="Running",
                    ready=True,
                    creation=float(n_pod),
                    start_time=NOW - 3600,
                )
            )
    pool = NodePool("default")
    return Cluster(
        nodepools=(pool,),
        instance_types={"default": tuple(types)},
        nodes=tuple(node_list),
        pods=tuple(pod_list),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--underutilized", type=float, default=0.3)
    parser.add_argument(
        "--max-replacements",
        type=int,
        default=Options().max_replacements,
        help="replacements per command (1: upstream's rule, no splits)",
    )
    parser.add_argument(
        "--no-stranding-check",
        action="store_true",
        help="plan without the kube-scheduler binding check (FEATURE_GATES=StrandingCheck=false)",
    )
    args = parser.parse_args()
    cluster = build(args.nodes, args.pods_per_node, args.underutilized)
    print(f"cluster: {len(cluster.nodes)} nodes, {len(cluster.pods)} pods")
    start = time.perf_counter()
    cpu = time.process_time()
    options = Options(
        max_replacements=args.max_replacements, stranding_check=not args.no_stranding_check
    )
    result = plan(cluster, options, NOW)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    methods = Counter(s.command.method for s in result.steps)
    removed = sum(len(s.command.candidates) for s in result.steps)
    added = sum(len(s.command.replacements) for s in result.steps)
    saved = result.price_before - result.price_after
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"plan: {elapsed:.2f} s ({cpu:.2f} cpu s), {len(result.steps)} commands {dict(methods)}")
    print(f"nodes removed {removed}, replacements {added}")
    print(
        f"price/h {result.price_before:.2f} -> {result.price_after:.2f}"
        f" (saved {saved:.2f}, {saved / result.price_before:.1%}); peak RSS {rss:.0f} MiB"
    )


if __name__ == "__main__":
    main()
