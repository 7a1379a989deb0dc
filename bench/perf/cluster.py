"""A fresh local cluster per run: control plane + kwok + the controller's CRDs and NodePool.

``perf_cluster`` starts the local control plane (``karpenter.sandbox.controlplane``) with kwok
beside it and the scheduler's and controller-manager's client rate limits raised to
``PRODUCTION_CLIENT_RATE`` (the stock 20 QPS of the controller-manager would pace a 1000-pod
burst and measure the ReplicaSet controller, not the autoscaler), installs the CRDs of the
controller under test (ours from ``config/crd``; upstream's from its module's kwok chart) and
applies the NodePool every scenario shares: upstream's performance-suite NodePool (linux,
on-demand, kwok instance size < 32, WhenEmptyOrUnderutilized after 30 s, 100 % budget).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from bench import gen_kwok_catalog
from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from karpenter.sandbox import bootstrap, kwok
from karpenter.sandbox.controlplane import (
    PRODUCTION_CLIENT_RATE,
    ClientRate,
    LocalControlPlane,
    ensure_binaries,
)

POOL = "default"
DISCOVERY = ("testing/cluster", "unspecified")
KWOK_CLASSES = kc.Resource("karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", "KWOKNodeClass")


# Writes to pods, nodes and NodeClaims, with who made them and when (microseconds): what the
# timeline (``bench/perf/timeline.py``) reads to tell the scheduler's, kwok's and the
# controller's steps apart. Reads and watches are not logged.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: ""
    resources: ["pods", "pods/status", "pods/binding", "nodes", "nodes/status"]
  - group: "karpenter.sh"
    resources: ["nodeclaims", "nodeclaims/status"]
- level: None
"""


@contextlib.contextmanager
def perf_cluster(
    work: Path | None = None,
    client_rate: ClientRate = PRODUCTION_CLIENT_RATE,
    audit: bool = False,
) -> Iterator[LocalControlPlane]:
    """The control plane with kwok, torn down on exit (``audit``: with ``AUDIT_POLICY``)."""
    with contextlib.ExitStack() as stack:
        if work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perf-")))
        plane = LocalControlPlane(
            ensure_binaries(),
            work / "controlplane",
            kwok=kwok.KwokOptions(kwok.ensure_kwok()),
            client_rate=client_rate,
            audit_policy=AUDIT_POLICY if audit else "",
        )
        yield stack.enter_context(plane)


def nodepool(kind: str) -> dict[str, Any]:
    """Upstream's performance-suite NodePool, pointing at the controller's node class."""
    ref = (
        {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
        if kind == "upstream"
        else {"group": "simulated.karpenter.sh", "kind": "SimulatedNodeClass", "name": "default"}
    )
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": POOL, "labels": dict([DISCOVERY])},
        "spec": {
            "template": {
                "metadata": {"labels": dict([DISCOVERY])},
                "spec": {
                    "nodeClassRef": ref,
                    "expireAfter": "Never",
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "karpenter.kwok.sh/instance-size",
                            "operator": "Lt",
                            "values": ["32"],
                        },
                    ],
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


async def prepare(kube: kc.KubeClient, kind: str) -> None:
    """CRDs, the node class (upstream: a Ready KWOKNodeClass) and the NodePool."""
    if kind == "upstream":
        await _upstream_crds(kube)
        await kube.create(
            KWOK_CLASSES,
            {
                "apiVersion": "karpenter.kwok.sh/v1alpha1",
                "kind": "KWOKNodeClass",
                "metadata": {"name": "default"},
            },
        )
        # Nothing reconciles a KWOKNodeClass's status; upstream's test environment sets it.
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "Ready",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        await kube.merge_patch(
            KWOK_CLASSES, "default", {"status": {"conditions": [ready]}}, subresource="status"
        )
    else:
        await bootstrap.install_crds(kube, RealClock())
    await kube.create(kc.NODEPOOLS, nodepool(kind))


async def _upstream_crds(kube: kc.KubeClient) -> None:
    # The chart's CRDs (karpenter.sh, capacity buffers) and the KWOKNodeClass CRD.
    kwok_dir = gen_kwok_catalog.module_dir() / "kwok"
    for crd_dir in (kwok_dir / "charts" / "crds", kwok_dir / "apis" / "crds"):
        await bootstrap.install_crds(kube, RealClock(), crd_dir)


@contextlib.asynccontextmanager
async def connected(plane: LocalControlPlane) -> AsyncIterator[kc.KubeClient]:
    """An admin client of the cluster."""
    async with kc.connect(plane.kubeconfig) as kube:
        yield kube
