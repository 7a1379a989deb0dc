"""Watching a perf phase from outside: pods Running, the fleet, and when it settles.

Everything is read from the apiserver the way upstream's suite reads it: a node counts when it
carries ``karpenter.sh/nodepool``; utilisation is upstream's "reserved" utilisation — per node,
the requests of its non-terminal pods over its allocatable, averaged over the nodes; the fleet
price is the catalogue price of each node's (instance type, zone, capacity type). A phase ends
when its pods are all Running (scale-out), and, for consolidation and drift, when no node has
appeared, gone or been marked for disruption for ``quiet_s`` seconds; its duration runs to the
last such change (the quiet wait itself is not counted).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
import anyio

from bench.perf.processes import Sampler
from karpenter.aio.clock import RealClock
from karpenter.core.model import quantity
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.kube.informers import Informer

POLL_S = 1.0
TEST_PODS = "testing/cluster=unspecified"  # the label every scenario pod carries (workloads.py)
_TEST_KEY, _, _TEST_VALUE = TEST_PODS.partition("=")
T = TypeVar("T")
Prices = Mapping[tuple[str, str, str], float]


@dataclass(frozen=True)
class Fleet:
    """The cluster at one moment."""

    nodes: int
    price: float
    cpu_util: float
    memory_util: float
    running: int
    pending: int
    disrupting: int
    signature: frozenset[str]  # node names, with a mark on those being disrupted


def _node_key(node: kc.Obj) -> tuple[str, str, str]:
    labels = codec.meta(node).get("labels") or {}
    return (
        labels.get("node.kubernetes.io/instance-type", ""),
        labels.get("topology.kubernetes.io/zone", ""),
        labels.get("karpenter.sh/capacity-type", ""),
    )


def _disrupting(node: kc.Obj) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return bool(codec.meta(node).get("deletionTimestamp")) or any(
        t.get("key") == "karpenter.sh/disrupted" for t in taints
    )


def _requests(pod: kc.Obj) -> tuple[float, float]:
    cpu = mem = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        req = (container.get("resources") or {}).get("requests") or {}
        cpu += quantity.parse_quantity(str(req.get("cpu", "0"))) / 1000
        mem += quantity.parse_quantity(str(req.get("memory", "0"))) / 1000
    return cpu, mem


async def fleet(kube: kc.KubeClient, prices: Prices) -> Fleet:
    """Nodes, price, utilisation and pod counts now."""
    nodes, _ = await kube.list(kc.NODES, label_selector="karpenter.sh/nodepool")
    pods, _ = await kube.list(kc.PODS, label_selector=TEST_PODS)
    used: dict[str, list[float]] = {}
    running = pending = 0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if codec.meta(pod).get("deletionTimestamp") is None:
            running += phase == "Running"
            pending += phase == "Pending"
        node = (pod.get("spec") or {}).get("nodeName")
        if node and phase not in ("Succeeded", "Failed"):
            cpu, mem = _requests(pod)
            total = used.setdefault(node, [0.0, 0.0])
            total[0] += cpu
            total[1] += mem
    cpu_utils, mem_utils = [], []
    for node in nodes:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        cpu = quantity.parse_quantity(str(alloc.get("cpu", "0"))) / 1000
        mem = quantity.parse_quantity(str(alloc.get("memory", "0"))) / 1000
        cpu_used, mem_used = used.get(codec.name(node), [0.0, 0.0])
        if cpu:
            cpu_utils.append(cpu_used / cpu)
        if mem:
            mem_utils.append(mem_used / mem)
    return Fleet(
        len(nodes),
        sum(prices.get(_node_key(n), 0.0) for n in nodes),
        sum(cpu_utils) / len(cpu_utils) if cpu_utils else 0.0,
        sum(mem_utils) / len(mem_utils) if mem_utils else 0.0,
        running,
        pending,
        sum(_disrupting(n) for n in nodes),
        frozenset(codec.name(n) + ("!" if _disrupting(n) else "") for n in nodes),
    )


async def sampled(sampler: Sampler, work: Callable[[], Awaitable[T]]) -> T:
    """``work()``, with the controller sampled twice a second meanwhile."""

    async def sample() -> None:
        while True:
            sampler.sample()
            await anyio.sleep(0.5)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        result = await work()
        tg.cancel_scope.cancel()
    return result


async def _read(read: Callable[[], Awaitable[T]], deadline: float) -> T:
    """``read()``, asked again on a transient failure until ``deadline`` (monotonic): an
    apiserver saturated by a burst may not answer a 2000-pod list within the client's 120 s, or
    reset a new connection (both seen in XL runs); what a phase measures comes from the
    objects' own timestamps and the fleet's last change, not from when a poll succeeded."""
    while True:
        try:
            return await read()
        except (TimeoutError, aiohttp.ClientError, errors.ApiError) as err:
            if time.monotonic() > deadline:
                raise TimeoutError(f"apiserver not read by the deadline: {err!r}") from err
            await anyio.sleep(POLL_S)


class _TestPods:
    """The scenario's pods (``testing/cluster=unspecified``) as list + watch tell them."""

    def __init__(self) -> None:
        self.pods: dict[str, kc.Obj] = {}

    def replace(self, objects: Sequence[kc.Obj]) -> None:
        self.pods = {_pod_key(o): o for o in objects if _is_test_pod(o)}

    def apply(self, event: str, obj: kc.Obj) -> None:
        if event == "DELETED" or not _is_test_pod(obj):
            self.pods.pop(_pod_key(obj), None)
        else:
            self.pods[_pod_key(obj)] = obj


def _pod_key(pod: kc.Obj) -> str:
    meta = codec.meta(pod)
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _is_test_pod(pod: kc.Obj) -> bool:
    return (codec.meta(pod).get("labels") or {}).get(_TEST_KEY) == _TEST_VALUE


async def wait_running(kube: kc.KubeClient, pods: int, timeout_s: float, started: float) -> float:
    """Seconds from ``started`` (wall clock) until ``pods`` pods are Running; the moment is
    the latest Ready transition among them (1 s resolution), not the moment it was seen.

    Pods are followed by one list and a watch, not by a list a second: on a control plane
    saturated by the burst it measures, listing 1000-2000 pods every second took the
    apiserver's CPU (and the harness's own, decoding them) from the controller and the
    kube-scheduler under test; a watch costs the apiserver one more receiver of events it
    encodes anyway. The verdict is confirmed by one last list."""
    deadline = time.monotonic() + timeout_s
    seen = _TestPods()
    informer = Informer(kube, kc.PODS, seen, RealClock())
    result: float | None = None
    with anyio.move_on_after(timeout_s):
        async with anyio.create_task_group() as tg:
            await tg.start(informer.run)
            while result is None:
                running = sum(1 for p in seen.pods.values() if _running(p))
                if running >= pods and len(seen.pods) == pods:
                    result = await _confirmed_running(kube, pods, deadline, started)
                if result is None:
                    await anyio.sleep(POLL_S / 4)
            tg.cancel_scope.cancel()
    if result is None:
        running = sum(1 for p in seen.pods.values() if _running(p))
        raise TimeoutError(f"{running}/{pods} pods Running after {timeout_s}s")
    return result


async def _confirmed_running(
    kube: kc.KubeClient, pods: int, deadline: float, started: float
) -> float | None:
    """What the watch said, read back from the apiserver: the seconds to the last Ready
    transition, or None if the list disagrees (the watch was behind)."""
    items, _ = await _read(lambda: kube.list(kc.PODS, label_selector=TEST_PODS), deadline)
    running = [p for p in items if _running(p)]
    if len(running) >= pods and len(items) == pods:
        return max(_ready_at(p) for p in running) - started
    return None


def _running(pod: kc.Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not codec.meta(pod).get(
        "deletionTimestamp"
    )


def _ready_at(pod: kc.Obj) -> float:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            when = codec.parse_time(str(cond.get("lastTransitionTime")))
            if when is not None:
                return when
    return RealClock().now()


async def wait_settled(
    kube: kc.KubeClient,
    prices: Prices,
    pods: int,
    quiet_s: float,
    timeout_s: float,
    extra: Callable[[], Awaitable[bool]] | None = None,
) -> tuple[float, bool]:
    """Seconds until the fleet last changed, once ``pods`` run and it stayed unchanged for
    ``quiet_s``; and whether it settled before ``timeout_s``."""
    start = time.monotonic()
    last_change = start
    seen: frozenset[str] | None = None
    while True:
        now_fleet = await _read(lambda: fleet(kube, prices), start + timeout_s)
        now = time.monotonic()
        if now_fleet.signature != seen:
            seen, last_change = now_fleet.signature, now
        ready = now_fleet.running == pods and not now_fleet.disrupting
        if ready and extra is not None:
            ready = await extra()
        if ready and now - last_change >= quiet_s:
            return last_change - start, True
        if now - start > timeout_s:
            return now - start, False
        await anyio.sleep(2 * POLL_S)
