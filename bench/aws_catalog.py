"""AWS instance-type catalogue build time: EC2 data → priced, labelled core InstanceTypes.

Times, for each region, the phases the controller and ``simulate``'s ``aws`` preset run:
reading and parsing the DescribeInstanceTypes / Offerings captures (moto's bundled data, the
same JSON EC2 returns), pricing (the shared us-east-1 snapshot when present, else estimates),
and the catalogue build (capacity, overhead, labels, offerings). Also one provisioning pass
of a 1,000-pod mix on the us-east-1 catalogue. Run: ``python bench/aws_catalog.py``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.scheduler import solve
from karpenter.providers.aws import preset as awspreset
from karpenter.providers.aws.core import catalog
from karpenter.providers.aws.core.capacity import CapacityOptions

PRICES = Path("/work/shared/data/ec2-on-demand-prices.json")
T = TypeVar("T")


def _time(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    samples = []
    result = fn()
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def bench_region(region: str, repeat: int) -> dict[str, float]:
    """Median seconds of each phase for one region."""

    def load() -> awspreset.RegionData:
        awspreset.region_data.cache_clear()  # time the real read, not the memo
        return awspreset.region_data(region)

    load_s, data = _time(load, repeat)
    price_file = str(PRICES) if PRICES.exists() else ""
    price_s, table = _time(lambda: awspreset.price_table(region, price_file, data.infos), repeat)
    inp = catalog.CatalogInput(region, data.zones, table, data.zone_ids, CapacityOptions())
    build_s, types = _time(lambda: catalog.build(data.infos, inp), repeat)
    return {"types": len(types), "load": load_s, "price": price_s, "build": build_s}


def bench_solve() -> tuple[float, int, float]:
    """One provisioning pass of 1,000 mixed pods on us-east-1's real types."""
    data = awspreset.region_data("us-east-1")
    table = awspreset.price_table("us-east-1", str(PRICES) if PRICES.exists() else "", data.infos)
    types = catalog.build(
        data.infos, catalog.CatalogInput("us-east-1", data.zones, table, data.zone_ids)
    )
    pool = NodePool("default")
    sizes = [(250, 512), (500, 1024), (1000, 2048), (2000, 4096)]
    pods = tuple(
        Pod(
            "default",
            f"p-{i}",
            uid=f"u-{i}",
            requests={"cpu": sizes[i % 4][0], "memory": sizes[i % 4][1] * 2**20 * 1000},
        )
        for i in range(1000)
    )
    cluster = Cluster(nodepools=(pool,), instance_types={"default": types}, pods=pods)
    start = time.perf_counter()
    results = solve(cluster, pods, Options())
    elapsed = time.perf_counter() - start
    return elapsed, len(results.new_claims), results.price


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--regions", default="us-east-1,us-west-2,eu-west-1,ap-southeast-2")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(
        "| region | types | read+parse EC2 data (s) | prices (s) | catalogue build (s) "
        "| total (s) |"
    )
    print("|---|---|---|---|---|---|")
    for region in args.regions.split(","):
        r = bench_region(region, args.repeat)
        total = r["load"] + r["price"] + r["build"]
        print(
            f"| {region} | {int(r['types'])} | {r['load']:.3f} | {r['price']:.3f} | "
            f"{r['build']:.3f} | {total:.3f} |"
        )
    elapsed, nodes, price = bench_solve()
    print(
        f"\n1,000 pods on us-east-1's catalogue: solve {elapsed:.3f} s, {nodes} nodes, "
        f"{price:.2f} USD/h"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"Peak RSS: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
