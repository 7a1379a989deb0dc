"""Test builders: core values with defaults plus overrides (last write wins)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, DaemonSet
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.node import Node
from karpenter.core.model.nodepool import NodeClaimTemplate, NodePool
from karpenter.core.model.pod import (
    HostPort,
    Pod,
    PodAffinityTerm,
    SelectorTerm,
    TopologySpread,
)
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.core.scheduling.selectors import LabelSelector
from karpenter.core.scheduling.taints import Taint, Toleration

ZONES = ("zone-a", "zone-b", "zone-c")
_counter = iter(range(1, 10**9))


def requests(**kw: str | int) -> dict[str, int]:
    """Resource list from keyword quantities (``memory="1Gi"``)."""
    return res.parse({k.replace("_", "-"): v for k, v in kw.items()})


def instance_type(
    name: str,
    cpu: int,
    memory_gi: int,
    *,
    pods: int = 110,
    price: float | None = None,
    zones: Sequence[str] = ZONES,
    capacity_types: Sequence[str] = ("on-demand",),
    spot_discount: float = 0.5,
    labels: Mapping[str, str] | None = None,
    extra: Mapping[str, str | int] | None = None,
    unavailable: Sequence[tuple[str, str]] = (),
    overhead: Mapping[str, str] | None = None,
) -> InstanceType:
    """An instance type offered in every zone × capacity type given."""
    base = price if price is not None else 0.05 * cpu + 0.01 * memory_gi
    offerings = tuple(
        Offering(z, ct, base * (spot_discount if ct == "spot" else 1.0), (z, ct) not in unavailable)
        for ct in capacity_types
        for z in zones
    )
    reqs = [
        Requirement.new("kubernetes.io/arch", "In", ["amd64"]),
        Requirement.new("kubernetes.io/os", "In", ["linux"]),
    ]
    for key, value in (labels or {}).items():
        reqs.append(Requirement.new(key, "In", [value]))
    capacity = res.parse({"cpu": cpu, "memory": f"{memory_gi}Gi", "pods": pods, **(extra or {})})
    return InstanceType(
        name, Requirements(reqs), offerings, capacity, res.parse(overhead or {"cpu": "100m"})
    )


def catalog() -> tuple[InstanceType, ...]:
    """A small catalog: 1/2/4/8/16 CPU types at 4 GiB per CPU, on-demand and spot."""
    return tuple(
        instance_type(f"m-{cpu}x", cpu, 4 * cpu, capacity_types=("on-demand", "spot"))
        for cpu in (1, 2, 4, 8, 16)
    )


def nodepool(name: str = "default", **kw: Any) -> NodePool:
    """A NodePool; template fields go through ``requirements=``, ``labels=``, ``taints=``."""
    template_fields = {
        k: kw.pop(k)
        for k in ("requirements", "labels", "taints", "startup_taints", "expire_after")
        if k in kw
    }
    return NodePool(name, template=NodeClaimTemplate(**template_fields), **kw)


def term(*exprs: tuple[str, str, Sequence[str]]) -> SelectorTerm:
    """A selector term from ``(key, operator, values)`` triples."""
    return tuple((k, op, tuple(v), None) for k, op, v in exprs)


def selector(**labels: str) -> LabelSelector:
    """A matchLabels selector."""
    return LabelSelector(tuple(sorted(labels.items())))


def pod(
    name: str | None = None,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    **kw: Any,
) -> Pod:
    """A pending pod requesting ``cpu``/``memory`` (plus one ``pods`` slot)."""
    n = next(_counter)
    extra = kw.pop("requests", {})
    return Pod(
        namespace,
        name or f"pod-{n}",
        uid=f"uid-{n:08d}",
        labels=dict(labels or {}),
        requests={**requests(cpu=cpu, memory=memory, pods=1), **extra},
        creation=float(n),
        **kw,
    )


def spread(key: str, skew: int = 1, **kw: Any) -> TopologySpread:
    """A DoNotSchedule spread over ``key`` selecting ``app=web`` unless told otherwise."""
    kw.setdefault("selector", selector(app="web"))
    return TopologySpread(key, skew, **kw)


def affinity_term(key: str, **labels: str) -> PodAffinityTerm:
    """A pod (anti-)affinity term on ``key`` selecting ``labels``."""
    return PodAffinityTerm(key, selector(**labels))


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    **kw: Any,
) -> Node:
    """An existing, ready Node."""
    alloc = requests(cpu=cpu, memory=memory, pods=110)
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        **(labels or {}),
    }
    return Node(name, all_labels, {}, tuple(taints), alloc, alloc, **kw)


def managed_node(
    name: str,
    it: InstanceType,
    *,
    zone: str = "zone-a",
    capacity_type: str = "on-demand",
    pool: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    **kw: Any,
) -> Node:
    """A launched, initialized Node of ``pool`` running as ``it`` in ``zone``."""
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "node.kubernetes.io/instance-type": it.name,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": capacity_type,
        **(labels or {}),
    }
    kw.setdefault("provider_id", f"test://{name}")
    return Node(
        name,
        all_labels,
        dict(annotations or {}),
        kw.pop("taints", ()),
        dict(it.capacity),
        it.allocatable,
        **kw,
    )


def bound(node_name: str, name: str | None = None, **kw: Any) -> Pod:
    """A running pod bound to ``node_name``."""
    kw.setdefault("phase", "Running")
    kw.setdefault("ready", True)
    return pod(name, node_name=node_name, **kw)


def cluster(
    pools: Sequence[NodePool] = (),
    types: Sequence[InstanceType] | Mapping[str, Sequence[InstanceType]] | None = None,
    **kw: Any,
) -> Cluster:
    """A cluster whose pools all share ``types`` (default: :func:`catalog`)."""
    pools = tuple(pools) or (nodepool(),)
    if isinstance(types, Mapping):
        by_pool = {k: tuple(v) for k, v in types.items()}
    else:
        shared = tuple(types) if types is not None else catalog()
        by_pool = {p.name: shared for p in pools}
    return Cluster(nodepools=pools, instance_types=by_pool, **kw)


def daemonset(name: str, cpu: str = "500m", memory: str = "256Mi", **kw: Any) -> DaemonSet:
    """A DaemonSet whose pods request ``cpu``/``memory``."""
    return DaemonSet("kube-system", name, pod(f"{name}-tmpl", cpu=cpu, memory=memory, **kw))


__all__ = (
    "HostPort",
    "Toleration",
    "affinity_term",
    "bound",
    "catalog",
    "cluster",
    "daemonset",
    "instance_type",
    "managed_node",
    "node",
    "nodepool",
    "pod",
    "requests",
    "selector",
    "spread",
    "term",
)
