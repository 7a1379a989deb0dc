"""SCHEDULER_CONFIG on a real control plane: a StatefulSet's pods spread over zones by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

CONFIG = """
podTopologySpread:
  defaultConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
"""


def _statefulset(name: str, pool: str, replicas: int) -> dict[str, Any]:
    template = harness.pod("x", pool)
    template["metadata"] = {"labels": {"app": name}}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",  # all replicas pending at once
            "selector": {"matchLabels": {"app": name}},
            "template": template,
        },
    }


@pytest.mark.asyncio
async def test_statefulset_pods_get_zonal_claims(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Six small replicas would share one node; the default zone spread asks for three zones.

    The selector comes from the StatefulSet (fetched by the controller) and the headless
    Service selecting its pods, as the kube-scheduler deduces it.
    """
    config = tmp_path / "scheduler.yaml"
    config.write_text(CONFIG)
    # The real kube-scheduler runs with the stock defaults (ScheduleAnyway): pods it binds to
    # the first node before a later pass sees them would skew the count, so one batch takes
    # all six replicas (a 5 s idle window outlasts the StatefulSet controller's pace under load).
    async with (
        harness.running(
            control_plane.kubeconfig,
            SCHEDULER_CONFIG=str(config),
            BATCH_IDLE_DURATION="5s",
            BATCH_MAX_DURATION="30s",
        ) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        assert op.provisioner.default_spread
        pool = harness.unique("spread")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, harness.nodepool(pool))
        name = harness.unique("db")
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"clusterIP": "None", "selector": {"app": name}},
        }
        await kube.create(kc.SERVICES, service, ns)
        await kube.create(kc.STATEFULSETS, _statefulset(name, pool, 6), ns)

        async def zones() -> set[str]:
            pods, _ = await kube.list(kc.PODS, ns)
            if len(pods) < 6 or not all(p["spec"].get("nodeName") for p in pods):
                return set()
            # the zones of the claims Karpenter made (what it controls: the soft default spread
            # lets the kube-scheduler bind two replicas to one node), once each claim names its
            # Node (a moment after the Node is registered and pods can bind)
            claims = await harness.claims_of(kube, pool)
            nodes = [str((c.get("status") or {}).get("nodeName") or "") for c in claims]
            if not nodes or not all(nodes):
                return set()
            found = set()
            for node in nodes:
                labels = (await kube.get(kc.NODES, node))["metadata"]["labels"]
                found.add(labels[lbl.ZONE])
            return found

        got = await harness.eventually(zones, "six bound replicas on claims in three zones")
        assert got == {"test-zone-1", "test-zone-2", "test-zone-3"}
        await kube.delete(kc.STATEFULSETS, name, ns)
        await harness.cleanup(kube, pool, ns)
