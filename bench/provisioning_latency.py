"""Provisioning latency on a real control plane: pending pods → NodeClaims created.

Starts the local control plane (kube-apiserver, kube-scheduler, controller-manager), installs
the CRDs, runs the controller in-process with the simulated cloud and upstream's default batch
windows (idle 1 s, max 10 s unless overridden by --idle/--max), applies a NodePool, creates N
pods at once and measures, per pod, the time from when the controller's mirror first saw it
provisionable (the kube-scheduler's ``PodScheduled=False/Unschedulable`` arrived) until the
NodeClaim meant for it was created. The issue's target is "batch idle window + 200 ms",
measured from the last trigger of the window (the moment the batch could first close) to the
last NodeClaim created. Run: ``python bench/provisioning_latency.py [--pods 100]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from karpenter.aio.clock import RealClock
from karpenter.cloud.plugin import Host, Plugin
from karpenter.controllers.context import ControllerContext
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.kube import client as kc
from karpenter.kube.events import EventRecorder
from karpenter.observability.metrics import Metrics
from karpenter.operator import Operator
from karpenter.providers.simulated.cloud import SimulatedCloud
from karpenter.sandbox import bootstrap
from karpenter.sandbox.controlplane import LocalControlPlane, ensure_binaries
from karpenter.settings import Settings
from karpenter.state.cluster import ClusterState, is_provisionable

NAMESPACE = "default"


def _pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i}", "labels": {"app": "bench"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "pause", "resources": {"requests": {"cpu": "250m"}}}
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }


async def _measure(kubeconfig: Path, pods: int, idle: str, max_: str) -> dict[str, Any]:
    clock = RealClock()
    settings = Settings(
        BATCH_IDLE_DURATION=idle,
        BATCH_MAX_DURATION=max_,
        DISABLE_LEADER_ELECTION=True,
        METRICS_PORT=0,
        HEALTH_PROBE_PORT=0,
    )
    seen: dict[str, float] = {}
    keys = [f"{NAMESPACE}/bench-{i}" for i in range(pods)]
    done = anyio.Event()
    async with kc.connect(kubeconfig) as kube:
        await bootstrap.install_crds(kube, clock)
        await bootstrap.apply_default_nodepool(kube)
        cloud = SimulatedCloud(kube, fake_instance_types(20), clock)
        base = Host(kube, ClusterState(), EventRecorder(kube, clock), clock, Metrics(), settings)
        plugin = Plugin(cloud, settings.core_options(), services=(cloud.run,))
        op = Operator(
            ControllerContext.of(base, plugin),
            services=plugin.services,
            leader_services=plugin.leader_services,
        )

        def on_change(kind: str, key: str, obj: object) -> None:
            pod = op.state.pods.get(key) if kind == "Pod" else None
            if pod is not None and is_provisionable(pod):
                seen.setdefault(key, clock.now())
            # placed_at is written just after the NodeClaim lands in the mirror
            if kind == "NodeClaim" and all(k in op.provisioner.placed_at for k in keys):
                done.set()

        op.state.subscribe(on_change)
        async with anyio.create_task_group() as tg:
            await tg.start(op.run)
            start = clock.now()
            async with anyio.create_task_group() as creators:
                for i in range(pods):
                    creators.start_soon(kube.create, kc.PODS, _pod(i), NAMESPACE)
            created = clock.now()
            with anyio.fail_after(120):
                await done.wait()
            tg.cancel_scope.cancel()
    per_pod = [op.provisioner.placed_at[k] - seen[k] for k in keys]
    last_trigger = max(seen[k] for k in keys)
    last_claim = max(op.provisioner.placed_at[k] for k in keys)
    return {
        "pods": pods,
        "batch_idle": idle,
        "batch_max": max_,
        "create_pods_s": round(created - start, 3),
        "nodeclaims": len(op.provisioner.created_at),
        "last_trigger_to_last_nodeclaim_s": round(last_claim - last_trigger, 3),
        "per_pod_p50_s": round(statistics.median(per_pod), 3),
        "per_pod_max_s": round(max(per_pod), 3),
    }


def main() -> None:
    """Run the benchmark and print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--idle", default="1s")
    parser.add_argument("--max", default="10s")
    args = parser.parse_args()
    bin_dir = ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="karpenter-bench-") as work:
        t0 = time.monotonic()
        with LocalControlPlane(bin_dir, Path(work)) as plane:
            boot = time.monotonic() - t0
            result = anyio.run(_measure, plane.kubeconfig, args.pods, args.idle, args.max)
    result["controlplane_start_s"] = round(boot, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
