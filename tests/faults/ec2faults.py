"""EC2 faults (matrix item 2): the controller process against an EC2 that fails on purpose.

EC2 goes through ``ec2_proxy`` (the other services straight to moto). Once the controller
leads, the proxy injects faults at the plan's rates and keeps some pools without capacity.
A Deployment then needs nodes (which must land on pools that have capacity), is scaled to
zero (consolidation terminates the nodes through the same faults), and after the GC window
the census counts leaks. The report carries what was injected, the peak calls per API per
minute, the ICE/backoff evidence from logs and metrics, and whether the process ever died.
"""

from __future__ import annotations

import signal
import socket
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.providers.aws.runtime.nodeclasses import EC2NODECLASSES
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.faults import aws as fa
from tests.faults import crash
from tests.faults.ec2_proxy import Plan, ec2_fault_proxy
from tests.faults.process import LEADING_LINE, Controller, base_env

# the two cheapest pools of the pool's types never have capacity in any zone
NO_CAPACITY = {
    (t, z) for t in ("c5.large", "m5.large") for z in ("us-east-1a", "us-east-1b", "us-east-1c")
}
DEFAULT_RATES = {
    "CreateFleet": {"ice": 0.2, "throttle": 0.15, "5xx": 0.1, "reset": 0.05, "timeout": 0.05},
    "TerminateInstances": {"throttle": 0.2, "5xx": 0.1, "reset": 0.1},
    "*": {"throttle": 0.1, "5xx": 0.05, "reset": 0.05, "timeout": 0.02},
}
SETTLE_S = 240.0


@dataclass
class Report:
    """What one run saw."""

    seed: int
    pods: int
    injected: dict[str, int] = field(default_factory=dict)  # "Action/fault" → count
    peak_per_minute: dict[str, int] = field(default_factory=dict)
    placed_s: float = 0.0
    unplaced: list[str] = field(default_factory=list)
    on_empty_pools: list[str] = field(default_factory=list)  # claims launched into no-capacity
    leaks: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    ice_log_lines: int = 0
    ice_metric: int = 0  # no-capacity offerings the gauge showed as unavailable
    retry_log_lines: int = 0
    exit_codes: list[int] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hidden_offerings(port: int, pools: set[tuple[str, str]]) -> int:
    """How many (pool, capacity type) of ``pools`` /metrics shows with offering_available 0."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    name = "karpenter_cloudprovider_instance_type_offering_available{"
    hidden = 0
    for line in text.splitlines():
        if not line.startswith(name) or not line.endswith(" 0.0"):
            continue
        for it, zone in pools:
            wanted = (f'instance_type="{it}"', f'zone="{zone}"')
            hidden += all(w in line for w in wanted)
    return hidden


async def _placed(kube: kc.KubeClient, ns: str, count: int) -> bool:
    pods, _ = await kube.list(kc.PODS, ns)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return len(live) == count and all(p["spec"].get("nodeName") for p in live)


async def _workload(
    kube: kc.KubeClient, report: Report, nodeclass: str, plan: Plan, port: int
) -> tuple[str, str]:
    ns = await harness.namespace(kube)
    pool = f"ec2f-{uuid.uuid4().hex[:4]}"
    await kube.create(kc.NODEPOOLS, fa.nodepool(pool, nodeclass))
    start = time.monotonic()
    await kube.create(kc.DEPLOYMENTS, crash.deployment(pool, report.pods, cpu="900m"), ns)
    try:
        await harness.eventually(lambda: _placed(kube, ns, report.pods), "pods placed", SETTLE_S)
    except AssertionError:
        pods, _ = await kube.list(kc.PODS, ns)
        report.unplaced = [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
    report.placed_s = time.monotonic() - start
    report.ice_metric = _hidden_offerings(port, plan.no_capacity)
    for claim in await harness.claims_of(kube, pool):
        labels = claim["metadata"].get("labels") or {}
        if (labels.get(lbl.INSTANCE_TYPE, ""), labels.get(lbl.ZONE, "")) in plan.no_capacity:
            report.on_empty_pools.append(claim["metadata"]["name"])
    # consolidation takes the nodes away again, through the same faults
    await kube.merge_patch(kc.DEPLOYMENTS, "app", {"spec": {"replicas": 0}}, ns)

    async def gone() -> bool:
        return not await harness.claims_of(kube, pool)

    try:
        await harness.eventually(gone, "empty nodes consolidated", SETTLE_S)
    except AssertionError:
        report.stuck = [c["metadata"]["name"] for c in await harness.claims_of(kube, pool)]
    return ns, pool


async def experiment(
    plane: ControlPlane,
    moto_url: str,
    work: Path,
    *,
    seed: int = 7,
    pods: int = 6,
    rates: dict[str, dict[str, float]] | None = None,
    say: Callable[[str], None] = print,
) -> Report:
    """One run (module docstring)."""
    cluster = f"ec2f-{uuid.uuid4().hex[:6]}"
    account = await fa.seed(moto_url, cluster)
    plan = Plan(rates=rates or DEFAULT_RATES, no_capacity=set(NO_CAPACITY), seed=seed)
    # every kind at least once, whatever the dice say: the first launches meet them in turn
    plan.forced["CreateFleet"] = ["ice", "throttle", "5xx", "reset", "timeout"]
    report = Report(seed, pods)
    port = _free_port()
    with ec2_fault_proxy(moto_url, plan) as proxy:
        env = base_env(**fa.controller_env(account, proxy), METRICS_PORT=str(port))
        controller = Controller(
            ["--cloud-provider", "aws", "--kubeconfig", str(plane.kubeconfig)],
            env,
            work / f"{cluster}.log",
        )
        controller.start()
        try:
            await anyio.to_thread.run_sync(controller.wait_for, LEADING_LINE)
            await _run(plane, account, plan, report, port, say)
        finally:
            if controller.alive():
                controller.signal(signal.SIGTERM)
            report.exit_codes = list(controller.exits)
    lines = controller.lines()
    report.ice_log_lines = sum("removing offering from offerings" in line for line in lines)
    report.retry_log_lines = sum('"retry_in"' in line for line in lines)
    report.injected = {f"{a}/{f}": n for (a, f), n in sorted(plan.injected.items())}
    report.peak_per_minute = plan.per_minute()
    return report


async def _run(
    plane: ControlPlane,
    account: fa.Account,
    plan: Plan,
    report: Report,
    port: int,
    say: Callable[[str], None],
) -> None:
    async with (
        kc.connect(plane.kubeconfig) as kube,
        fa.session().client("ec2", endpoint_url=account.url) as ec2,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(fa.NodeAgent(kube, account).run)
        nodeclass = f"ec2f-{account.cluster}"
        await kube.create(EC2NODECLASSES, fa.nodeclass(account, nodeclass))
        await harness.eventually(
            lambda: crash._nodeclass_ready(kube, nodeclass), "EC2NodeClass Ready", SETTLE_S
        )
        plan.enabled = True
        ns, pool = await _workload(kube, report, nodeclass, plan, port)
        plan.enabled = False
        say(f"placed in {report.placed_s:.1f}s; injected {dict(plan.injected)}")

        async def no_leaks() -> bool:
            found = await fa.census(kube, ec2, account.cluster, [])
            report.leaks = found.leaks
            return not found.leaks

        try:
            await harness.eventually(no_leaks, "no unowned instance", crash.GC_WINDOW_S)
        except AssertionError:
            pass
        await kube.delete(kc.NAMESPACES, ns)
        await kube.delete(kc.NODEPOOLS, pool)
        await kube.delete(EC2NODECLASSES, nodeclass)
        tg.cancel_scope.cancel()


def summary(report: Report) -> dict[str, Any]:
    """The figures docs/reliability.md shows."""
    return {
        "injected": sum(report.injected.values()),
        "unplaced": len(report.unplaced),
        "on_empty_pools": len(report.on_empty_pools),
        "leaks": len(report.leaks),
        "stuck": len(report.stuck),
        "crashes": sum(1 for c in report.exit_codes if c != 0),
    }
