"""CapacityBuffers in `karpenter simulate`: behind their gate, resolved from the scenario's
PodTemplates and workloads, launched for in provisioning mode and kept by disruption mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from karpenter.core.model.cluster import Options
from karpenter.settings import Settings
from karpenter.simulate import loader, runner

NOW = 1_795_392_000.0  # 2026-11-23: the node is 22 days old, not expired
BASE = """
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceTypeCatalog
spec: {preset: fake, count: 8}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template: {spec: {requirements: []}}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: chunk, namespace: shop}
template:
  metadata: {labels: {app: chunk}}
  spec:
    containers: [{name: c, resources: {requests: {cpu: "2"}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 5
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: 500m}}}]
"""
PENDING = """
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""
BUFFERS = """
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: tmpl, namespace: shop}
spec: {podTemplateRef: {name: chunk}, replicas: 2}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: api, namespace: shop}
spec: {scalableRef: {apiGroup: apps, kind: Deployment, name: api}, percentage: 40}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: gone, namespace: shop}
spec: {scalableRef: {kind: StatefulSet, name: db}, replicas: 1}
"""
# an initialized, empty managed node with room for one 2-CPU chunk
EMPTY_NODE = """
---
apiVersion: v1
kind: Node
metadata:
  name: node-empty
  creationTimestamp: '2026-11-01T00:00:00Z'
  labels: {karpenter.sh/nodepool: default, karpenter.sh/initialized: 'true',
    karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: test-zone-1,
    node.kubernetes.io/instance-type: fake-it-3, kubernetes.io/arch: amd64,
    kubernetes.io/os: linux}
spec: {providerID: 'fake://node-empty'}
status:
  capacity: {cpu: '4', memory: 8Gi, pods: '40'}
  allocatable: {cpu: 3900m, memory: 8182Mi, pods: '40'}
"""
ONE_CHUNK = """
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: one, namespace: shop}
spec: {podTemplateRef: {name: chunk}, replicas: 1}
"""


def _scenario(text: str, gate: bool) -> loader.Scenario:
    settings = Settings(FEATURE_GATES="CapacityBuffer=true") if gate else Settings()
    return loader.load(["-"], text, settings)


def _provisioning(text: str, gate: bool = True) -> dict[str, Any]:
    return runner.provisioning(_scenario(text, gate), Options())


def test_buffers_launch_headroom_beside_the_pending_pods() -> None:
    """With the gate on, a PodTemplate buffer (2 chunks) and a 40%-of-5-replicas Deployment
    buffer (2 chunks) are launched for with the pending pod; their virtual pods are listed under
    capacityBufferPods, never as pods, and each buffer reports its conditions."""
    doc = _provisioning(BASE + PENDING + BUFFERS)
    [claim] = doc["nodeClaims"]
    assert claim["pods"] == ["shop/web-1"]
    assert claim["capacityBufferPods"] == [
        "shop/capacity-buffer-tmpl-1",
        "shop/capacity-buffer-tmpl-2",
        "shop/capacity-buffer-api-1",
        "shop/capacity-buffer-api-2",
    ]
    assert doc["unschedulable"] == []
    by_name = {b["name"]: b for b in doc["capacityBuffers"]}
    assert list(by_name) == ["shop/api", "shop/gone", "shop/tmpl"]
    assert (by_name["shop/api"]["replicas"], by_name["shop/tmpl"]["replicas"]) == (2, 2)
    assert by_name["shop/api"]["provisioning"] == {
        "status": "False",
        "reason": "RequiresNewCapacity",
        "message": "2/2 virtual pods required new capacity, 0 failed",
    }
    assert by_name["shop/gone"]["readyForProvisioning"] == {
        "status": "False",
        "reason": "ScalableRefNotFound",
        "message": 'statefulsets.apps "db" not found',
    }


def test_without_the_gate_buffers_change_nothing() -> None:
    """With the gate off the buffers are ignored with a note, and the document is exactly the
    one without them (no capacityBuffers key)."""
    scenario = _scenario(BASE + PENDING + BUFFERS, gate=False)
    assert not scenario.cluster.virtual_pods and not scenario.buffers
    assert scenario.notes == (
        "3 CapacityBuffer(s) ignored: FEATURE_GATES=CapacityBuffer=true is off",
    )
    assert runner.provisioning(scenario, Options()) == _provisioning(BASE + PENDING, gate=False)


def test_headroom_on_an_existing_node_fits_and_is_kept() -> None:
    """A chunk that fits an empty managed node needs no launch (Provisioning True,
    FitsExistingCapacity), and disruption mode no longer deletes that node as empty: it only
    replaces it by a cheaper node holding the chunk."""
    doc = _provisioning(BASE + EMPTY_NODE + ONE_CHUNK)
    assert doc["nodeClaims"] == []
    assert doc["existingNodes"] == [
        {"name": "node-empty", "pods": [], "capacityBufferPods": ["shop/capacity-buffer-one-1"]}
    ]
    assert doc["capacityBuffers"][0]["provisioning"]["reason"] == "FitsExistingCapacity"
    options = Options()
    without = runner.disruption(_scenario(BASE + EMPTY_NODE, True), options, NOW)
    assert [(c["reason"], c["nodes"]) for c in without["commands"]] == [("Empty", ["node-empty"])]
    kept = runner.disruption(_scenario(BASE + EMPTY_NODE + ONE_CHUNK, True), options, NOW)
    # not deleted as empty: at most replaced (on-demand by cheaper spot) by a node that holds
    # the chunk, and once replaced nothing more happens
    [command] = kept["commands"]
    assert (command["reason"], command["nodes"]) == ("Underutilized", ["node-empty"])
    [replacement] = command["replacements"]
    assert replacement["pods"] == []
    assert replacement["capacityBufferPods"] == ["shop/capacity-buffer-one-1"]
    assert kept["capacityBuffers"][0]["readyForProvisioning"]["reason"] == "Resolved"


def test_cli_notes_a_buffer_that_is_not_ready() -> None:
    """The CLI prints a not-ready buffer as a note on stderr and still exits 0."""
    result = subprocess.run(
        [sys.executable, "-m", "karpenter", "simulate", "-", "--output", "json"],
        input=BASE + PENDING + BUFFERS,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**_env(), "FEATURE_GATES": "CapacityBuffer=true"},
    )
    assert result.returncode == 0, result.stderr
    assert (
        "karpenter: note: CapacityBuffer shop/gone not ready (ScalableRefNotFound): "
        'statefulsets.apps "db" not found'
    ) in result.stderr
    assert len(json.loads(result.stdout)["capacityBuffers"]) == 3


def test_bad_buffer_document_is_one_line_naming_the_field() -> None:
    """A CapacityBuffer with a negative replicas is bad input: exit 2, one line naming it."""
    bad = BASE + "---\napiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\n"
    bad += "metadata: {name: b, namespace: shop}\n"
    bad += "spec: {podTemplateRef: {name: chunk}, replicas: -1}\n"
    result = subprocess.run(
        [sys.executable, "-m", "karpenter", "simulate", "-"],
        input=bad,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=_env(),
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "karpenter: <stdin>: document 5 (CapacityBuffer shop/b): spec.replicas:"
        " must be a non-negative integer"
    ]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "FEATURE_GATES"}
