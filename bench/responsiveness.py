"""Controller responsiveness during long passes: event-loop lag, /healthz latency, Lease renewals.

Starts a local control plane (as ``bench/provisioning_latency.py`` does) and, in one event
loop as the operator has it: the health server (``observability/server.py``), a leader elector
renewing its Lease on the apiserver (upstream's timings: 15 s lease, 10 s renew deadline, 2 s
retry), and the work under test, run the way the controllers run it:
- ``disruption``: the disruption controller's pass (``Disruption._decide``: instance types and
  the mirror's snapshot on the loop, ``planner.decide`` in a worker thread) over the
  disruption benchmark's cluster of ``--nodes`` nodes, loaded into the controller's mirror;
- ``provisioning``: the provisioner's pass up to its NodeClaims (snapshot and pending pods on
  the loop, ``solve`` in a worker thread) over ``--pods`` pending pods of the diverse mix.
Meanwhile a task sleeps 20 ms at a time and records how late it wakes (loop lag), and a separate
process (as a kubelet would) GETs /healthz every 100 ms and records each latency. Renewals are
the elector's attempts, with their start times. Prints one JSON line per workload.
Run: ``python bench/responsiveness.py --nodes 3000 --pods 20000``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from bench import disruption, scenario
from bench.disruption import NOW
from karpenter.aio.clock import RealClock
from karpenter.cloud.plugin import Host, Plugin
from karpenter.controllers.context import ControllerContext
from karpenter.controllers.disruption import Disruption
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.disruption.planner import plan
from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.kube import client as kc
from karpenter.kube.events import EventRecorder
from karpenter.kube.leader import LeaderElector
from karpenter.observability.metrics import Metrics
from karpenter.observability.server import serve_http
from karpenter.providers.simulated.cloud import SimulatedCloud
from karpenter.sandbox.controlplane import LocalControlPlane, ensure_binaries
from karpenter.settings import Settings
from karpenter.state import heap
from karpenter.state.cluster import ClusterState, KindStore

LAG_TICK_S = 0.02
TIMEOUTS = "karpenter_voluntary_disruption_consolidation_timeouts_total"
PROBE = """
import json, sys, time, urllib.request
url, stop = sys.argv[1], sys.argv[2]
out = []
while True:
    try:
        open(stop).close()
        break
    except OSError:
        pass
    t = time.monotonic()
    try:
        urllib.request.urlopen(url, timeout=30).read()
        out.append(time.monotonic() - t)
    except OSError:
        out.append(-1.0)
    time.sleep(0.1)
print(json.dumps(out))
"""


class ShiftedClock(RealClock):
    """Real time moved to the benchmark's date, so its nodes are an hour old, as in the bench."""

    def __init__(self, now: float) -> None:
        self._shift = now - super().now()

    def now(self) -> float:
        """The real clock, shifted."""
        return super().now() + self._shift


class TimedElector(LeaderElector):
    """The real elector, recording when each renewal attempt started and how it went."""

    attempts: list[tuple[float, float, str]]

    async def _try_acquire_or_renew(self) -> Any:
        started = time.monotonic()
        outcome = await super()._try_acquire_or_renew()
        self.attempts.append((started, time.monotonic() - started, outcome.value))
        return outcome


def _pcts(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    s = sorted(values)
    p50, p99 = s[len(s) // 2], s[min(len(s) - 1, int(0.99 * len(s)))]
    return {
        "n": len(s),
        "p50_ms": round(p50 * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "max_ms": round(s[-1] * 1000, 1),
    }


class GcPauses:
    """Durations of the cyclic collector's full (generation 2) runs, in whichever thread."""

    def __init__(self) -> None:
        self.full: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.monotonic()
        else:
            self.full.append(time.monotonic() - self._started)


def _cluster(nodes: int, underutilized: float, final: bool) -> list[dict[str, Any]]:
    """The disruption benchmark's NodePool, Nodes and Pods as manifests (``final``: as they are
    once its whole plan is carried out, where a pass judges every candidate and finds nothing)."""
    cluster = disruption.build(nodes, 10, underutilized)
    if final:
        cluster = plan(cluster, Options(), NOW).final
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {}}},
    }
    return [
        pool,
        *(scenario.node_manifest(n) for n in cluster.nodes),
        *(scenario.bound_manifest(p) for p in cluster.pods),
    ]


def _load(state: ClusterState, objects: list[dict[str, Any]]) -> None:
    stores: dict[str, KindStore[Any]] = {
        "Node": state.nodes,
        "Pod": state.pods,
        "NodePool": state.nodepools,
    }
    for obj in objects:
        store = stores.get(obj.get("kind", ""))
        if store is not None:
            store.upsert(obj)


async def _lag(samples: list[float]) -> None:
    while True:
        start = time.monotonic()
        await anyio.sleep(LAG_TICK_S)
        samples.append(time.monotonic() - start - LAG_TICK_S)


async def _work(kind: str, ctx: ControllerContext, count: int) -> dict[str, Any]:
    started = time.monotonic()
    done: dict[str, Any]
    if kind == "disruption":
        controller = Disruption(ctx)
        command = await controller._decide()  # the controller's pass itself
        done = {"nodes": count, "command": command.method if command else None}
        text = ctx.metrics.render().decode()
        done["timeouts"] = [
            line for line in text.splitlines() if line.startswith(TIMEOUTS) and "{" in line
        ]
    else:
        types = {"default": tuple(fake_instance_types(400))}
        cluster = ctx.state.snapshot(types)
        pending = ctx.state.provisionable_pods()
        results = await anyio.to_thread.run_sync(solve, cluster, pending, ctx.options)
        done = {"pods": len(pending), "nodeclaims": len(results.new_claims)}
    done["pass_s"] = round(time.monotonic() - started, 2)
    return done


async def _measure(
    kubeconfig: Path, kind: str, count: int, settle: bool, underutilized: float, final: bool
) -> dict[str, Any]:
    clock = ShiftedClock(NOW)
    settings = Settings(DISABLE_LEADER_ELECTION=True, METRICS_PORT=0, HEALTH_PROBE_PORT=0)
    if kind == "disruption":
        objects = _cluster(count, underutilized, final)
    else:
        objects = scenario.objects(count)
    lag: list[float] = []
    pauses = GcPauses()
    async with kc.connect(kubeconfig) as kube:
        cloud = SimulatedCloud(kube, fake_instance_types(400), clock)
        state = ClusterState()
        _load(state, objects)
        if settle:
            heap.settle()  # as the operator does once its informers have listed
        host = Host(kube, state, EventRecorder(kube, clock), clock, Metrics(), settings)
        ctx = ControllerContext.of(host, Plugin(cloud, settings.core_options()))
        elector = TimedElector(kube, "default", f"bench-{kind}", "bench", clock=clock)
        elector.attempts = []
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            ports = await tg.start(serve_http, ctx.metrics, "127.0.0.1", 0, 0, lambda: True)
            stop = Path(tempfile.mkdtemp()) / "stop"
            url = f"http://127.0.0.1:{ports[1]}/healthz"
            probed: list[bytes] = []
            finished = anyio.Event()

            async def probe() -> None:
                done = await anyio.run_process([sys.executable, "-c", PROBE, url, str(stop)])
                probed.append(done.stdout)
                finished.set()

            tg.start_soon(probe)

            async def lead() -> None:
                await anyio.sleep(4.5)  # two renewals before the pass
                tg.start_soon(_lag, lag)
                gc.callbacks.append(pauses)
                try:
                    result.update(await _work(kind, ctx, count))
                finally:
                    gc.callbacks.remove(pauses)
                await anyio.sleep(4.5)  # and two after

            await elector.run(lead)
            stop.touch()
            await finished.wait()
            tg.cancel_scope.cancel()
    out = probed[0]
    renewals = elector.attempts
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(renewals)]
    result.update(
        workload=kind,
        loop_lag=_pcts(lag),
        healthz=_pcts([v for v in json.loads(out) if v >= 0]),
        healthz_failures=sum(1 for v in json.loads(out) if v < 0),
        gc_full=_pcts(pauses.full),
        lease_attempts=len(renewals),
        lease_failed=sum(1 for r in renewals if r[2] != "holding"),
        lease_max_gap_s=round(max(gaps), 2) if gaps else None,
        lease_max_request_s=round(max(r[1] for r in renewals), 2),
    )
    return result


def main() -> None:
    """Run each workload against one local control plane; one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=3000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--only", choices=("disruption", "provisioning"))
    parser.add_argument(
        "--final", action="store_true", help="the cluster after its whole disruption plan"
    )
    parser.add_argument(
        "--underutilized",
        type=float,
        default=0.3,
        help="share of oversized nodes (0: nothing consolidates, every candidate is judged)",
    )
    parser.add_argument(
        "--no-settle", action="store_true", help="leave the mirror in the collector (before)"
    )
    args = parser.parse_args()
    bin_dir = ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="karpenter-bench-") as work:
        with LocalControlPlane(bin_dir, Path(work)) as plane:
            for kind, count in (("disruption", args.nodes), ("provisioning", args.pods)):
                if args.only in (None, kind):
                    settle = not args.no_settle
                    result = anyio.run(
                        _measure,
                        plane.kubeconfig,
                        kind,
                        count,
                        settle,
                        args.underutilized,
                        args.final,
                    )
                    result["settled"] = settle
                    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
