"""Scenario files for whole ``karpenter simulate`` runs: the benchmarks' clusters as manifests.

``--pods N`` writes the diverse mix of ``bench/scheduling.py`` (same seeded RNG, same pods in the
same order) as Pod manifests, with the ``fake`` catalogue of 400 types and one NodePool (limits
cpu 10M, memory 10M Gi), so ``karpenter simulate`` on the file solves exactly that benchmark's
pass. ``--nodes N`` writes the cluster of ``bench/disruption.py`` (N managed Nodes and their
bound Pods) for ``karpenter simulate --disruption --now 2027-01-15T08:00:00Z``.
Formats: ``yaml`` (one document per object, as a file of manifests), ``json`` (one ``kind: List``
object, as ``kubectl get -o json`` prints) and ``json-stream`` (concatenated objects).
Run: ``python bench/scenario.py --pods 20000 --format yaml > 20k.yaml``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from typing import Any

from bench import disruption
from bench.scheduling import Maker
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster
from karpenter.core.model.node import Node
from karpenter.core.model.pod import Pod, PodAffinityTerm, TopologySpread
from karpenter.core.scheduling.selectors import LabelSelector

# Pod n is created n seconds after this moment, so queue order (creation) matches the bench's.
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z

Obj = dict[str, Any]
CATALOG: Obj = {
    "apiVersion": "simulation.karpenter.sh/v1alpha1",
    "kind": "InstanceTypeCatalog",
    "metadata": {"name": "fake"},
    "spec": {"preset": "fake", "count": 400},
}


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantities(values: res.Resources) -> dict[str, str]:
    return {k: str(v // 1000) if v % 1000 == 0 else f"{v}m" for k, v in sorted(values.items())}


def _selector(sel: LabelSelector | None) -> Obj:
    return {"matchLabels": dict(sel.match_labels)} if sel is not None else {}


def _term(term: PodAffinityTerm) -> Obj:
    return {"topologyKey": term.topology_key, "labelSelector": _selector(term.selector)}


def _spread(tsc: TopologySpread) -> Obj:
    return {
        "maxSkew": tsc.max_skew,
        "topologyKey": tsc.topology_key,
        "whenUnsatisfiable": tsc.when_unsatisfiable,
        "labelSelector": _selector(tsc.selector),
    }


def pod_manifest(pod: Pod) -> Obj:
    """A v1 Pod manifest that decodes back to ``pod`` (requests, labels, constraints)."""
    stamp = _stamp(EPOCH + pod.creation)
    mebibytes = pod.requests[res.MEMORY] // 1000 // 2**20
    requests = {"cpu": f"{pod.requests[res.CPU]}m", "memory": f"{mebibytes}Mi"}
    spec: Obj = {
        "containers": [{"name": "app", "image": "nginx", "resources": {"requests": requests}}]
    }
    if pod.topology_spread:
        spec["topologySpreadConstraints"] = [_spread(t) for t in pod.topology_spread]
    affinity: Obj = {}
    if pod.required_affinity:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                _term(t) for t in pod.required_affinity
            ]
        }
    if pod.required_anti_affinity:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                _term(t) for t in pod.required_anti_affinity
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": f"00000000-0000-4000-8000-{pod.uid:0>12}",  # UUID-shaped, same order
            "labels": dict(pod.labels),
            "creationTimestamp": stamp,
        },
        "spec": spec,
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def objects(pods: int) -> list[Obj]:
    """The catalogue, the NodePool and ``pods`` pods of the diverse mix."""
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {}}, "limits": {"cpu": "10000000", "memory": "10000000Gi"}},
    }
    return [CATALOG, pool, *(pod_manifest(p) for p in Maker().diverse(pods))]


def node_manifest(node: Node) -> Obj:
    """A v1 Node manifest of an initialized node of the disruption benchmark."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": dict(node.labels),
            "creationTimestamp": _stamp(node.creation),
        },
        "spec": {"providerID": node.provider_id},
        "status": {
            "capacity": _quantities(node.capacity),
            "allocatable": _quantities(node.allocatable),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def bound_manifest(pod: Pod) -> Obj:
    """A running pod of the disruption benchmark, bound to its node."""
    manifest = pod_manifest(pod)
    manifest["metadata"]["creationTimestamp"] = _stamp(pod.creation)
    manifest["spec"]["nodeName"] = pod.node_name
    manifest["status"] = {
        "phase": "Running",
        "startTime": _stamp(pod.start_time or 0.0),
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    return manifest


def cluster_objects(nodes: int) -> list[Obj]:
    """The catalogue, the NodePool, the Nodes and the Pods of the disruption benchmark."""
    cluster: Cluster = disruption.build(nodes, 10, 0.3)
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {}}},
    }
    return [
        CATALOG,
        pool,
        *(node_manifest(n) for n in cluster.nodes),
        *(bound_manifest(p) for p in cluster.pods),
    ]


def _yaml(items: list[Obj]) -> str:
    import yaml  # noqa: PLC0415 - only this format needs it

    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump_all(items, Dumper=dumper, sort_keys=False)
    # as kubectl prints them: timestamps double-quoted, not single-quoted
    return re.sub(r"(: )'(\d{4}-\d\d-\d\dT[^']*)'", r'\1"\2"', text)


def render(items: list[Obj], fmt: str) -> str:
    """``items`` in one of the formats."""
    if fmt == "yaml":
        return _yaml(items)
    if fmt == "json":
        doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}}
        return json.dumps({**doc, "items": items}, indent=4) + "\n"
    return "".join(json.dumps(item, indent=4) + "\n" for item in items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--pods", type=int, help="pending pods of the diverse mix")
    which.add_argument("--nodes", type=int, help="nodes of the disruption benchmark")
    parser.add_argument("--format", choices=("yaml", "json", "json-stream"), default="yaml")
    args = parser.parse_args()
    items = objects(args.pods) if args.pods is not None else cluster_objects(args.nodes)
    sys.stdout.write(render(items, args.format))


if __name__ == "__main__":
    main()
