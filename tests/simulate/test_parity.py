"""`karpenter simulate` on upstream parity rules: each case is input YAML and the printed JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

CATALOG = """\
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceTypeCatalog
metadata: {name: fake}
spec: {preset: fake, count: 8}
"""

PLAIN_POOL = """\
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec: {template: {spec: {}}}
"""

POOL = """\
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      startupTaints: [{key: example.com/agent-not-ready, effect: NoSchedule}]
"""


def simulate(text: str, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "karpenter", "simulate", "-", "--output", "json", *args],
        input=text,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def node(name: str, zone: str, *, labels: str = "", taints: str = "[]", cpu: str = "4") -> str:
    return f"""\
---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    karpenter.sh/nodepool: default
    topology.kubernetes.io/zone: {zone}
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    {labels or "example.com/x: y"}
spec: {{providerID: "fake://{name}", taints: {taints}}}
status:
  capacity: {{cpu: "{cpu}", memory: 8Gi, pods: "40"}}
  allocatable: {{cpu: "{cpu}", memory: 8Gi, pods: "40"}}
"""


def pod(
    name: str, *, cpu: str = "1", labels: str = "{}", spec: str = "", node_name: str = ""
) -> str:
    bound = f"\n  nodeName: {node_name}" if node_name else ""
    return f"""\
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {labels}}}
spec:{bound}
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}]
{spec}"""


STARTUP = "[{key: example.com/agent-not-ready, effect: NoSchedule}]"


def test_claimless_node_startup_taint_ignored_until_initialized() -> None:
    """A managed Node without a NodeClaim takes a pending pod despite its NodePool's startup
    taint while uninitialized, and repels it once initialized."""
    fresh = simulate(CATALOG + POOL + node("booting", "test-zone-1", taints=STARTUP) + pod("p"))
    assert fresh["nodeClaims"] == []
    assert fresh["existingNodes"] == [{"name": "booting", "pods": ["default/p"]}]
    done = node("up", "test-zone-1", labels='karpenter.sh/initialized: "true"', taints=STARTUP)
    after = simulate(CATALOG + POOL + done + pod("p"))
    assert after["existingNodes"] == [] and len(after["nodeClaims"]) == 1


AFFINE = """\
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector: {matchLabels: {app: db}}
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2, test-zone-3]}
"""


def test_self_affinity_opens_zone_when_populated_zone_forbidden() -> None:
    """A self-affine pod whose own requirements exclude the only zone holding matching pods
    opens a new zone instead of staying pending."""
    full = node("n1", "test-zone-1", cpu="1")
    running = pod("db-0", cpu="900m", labels="{app: db}", node_name="n1")
    out = simulate(
        CATALOG + PLAIN_POOL + full + running + pod("db-1", labels="{app: db}", spec=AFFINE)
    )
    assert out["unschedulable"] == []
    (claim,) = out["nodeClaims"]
    assert claim["launch"]["zone"] in ("test-zone-2", "test-zone-3")


ANTI = """\
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector: {matchLabels: {app: zk}}
"""


def test_zonal_anti_affinity_commits_late() -> None:
    """Three zonal self-anti-affine pods: one is placed (its claim spans every empty zone), the
    other two stay pending for a later pass, as upstream."""
    pods = "".join(pod(f"zk-{i}", labels="{app: zk}", spec=ANTI) for i in range(3))
    out = simulate(CATALOG + PLAIN_POOL + pods)
    assert [len(c["pods"]) for c in out["nodeClaims"]] == [1]
    assert len(out["unschedulable"]) == 2
    assert all("anti-affinity" in u["reason"] for u in out["unschedulable"])


NOW = "2026-11-23T00:00:00Z"


def instance_type(name: str, cpu: int, offerings: str) -> str:
    return f"""\
---
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceType
metadata: {{name: {name}}}
spec:
  capacity: {{cpu: "{cpu}", memory: {4 * cpu}Gi, pods: "110"}}
  overhead: {{cpu: 100m}}
  requirements:
    - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
    - {{key: kubernetes.io/os, operator: In, values: [linux]}}
  offerings: {offerings}
"""


def managed(name: str, it: str, cpu: int, zone: str = "z1", ctype: str = "on-demand") -> str:
    return f"""\
---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  creationTimestamp: '2026-11-01T00:00:00Z'
  labels: {{karpenter.sh/nodepool: default, karpenter.sh/initialized: 'true',
    karpenter.sh/capacity-type: {ctype}, topology.kubernetes.io/zone: {zone},
    node.kubernetes.io/instance-type: {it}, kubernetes.io/arch: amd64, kubernetes.io/os: linux}}
spec: {{providerID: 'fake://{name}'}}
status:
  capacity: {{cpu: "{cpu}", memory: {4 * cpu}Gi, pods: "110"}}
  allocatable: {{cpu: "{cpu}", memory: {4 * cpu}Gi, pods: "110"}}
"""


def both(od: float) -> str:
    return f"[{{zone: z1, capacityType: on-demand, price: {od}}}, " + (
        f"{{zone: z1, capacityType: spot, price: {od / 2}}}]"
    )


def test_multi_node_same_type_ceiling_applies_before_spot_pin() -> None:
    """Two on-demand nodes whose pods fit one spot m4 (0.18/h): one runs an on-demand-only type
    at 0.15/h that is also a replacement option, so nothing stays below its price and the
    multi-node replacement is abandoned; the smaller command deletes the other node."""
    catalog = (
        instance_type("m2", 2, both(0.18))
        + instance_type("m4", 4, both(0.36))
        + instance_type("m8", 8, both(0.72))
        + instance_type("odx", 4, "[{zone: z1, capacityType: on-demand, price: 0.15}]")
    )
    pool = """\
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s,
    budgets: [{nodes: 100%}]}
"""
    nodes = managed("node-a", "odx", 4) + managed("node-b", "m2", 2)
    pods = pod("pa", cpu="1500m", node_name="node-a") + pod("pb", node_name="node-b")
    out = simulate(catalog + pool + nodes + pods, "--disruption", "--now", NOW)
    assert [(c["reason"], c["nodes"], c["replacements"]) for c in out["commands"]] == [
        ("Underutilized", ["node-b"], [])
    ]
    assert out["commands"][0]["podsMoved"] == [{"pod": "default/pb", "node": "node-a"}]


def test_requirement_on_missing_well_known_label_drifts() -> None:
    """A NodePool requirement on a well-known label the node lacks (region) drifts the node."""
    pool = """\
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: topology.kubernetes.io/region, operator: In, values: [test-region]}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1m, budgets: [{nodes: 100%}]}
"""
    nodes = managed("node-1", "fake-it-3", 4, zone="test-zone-1")
    out = simulate(
        CATALOG + pool + nodes + pod("p", node_name="node-1"), "--disruption", "--now", NOW
    )
    assert [(c["reason"], c["nodes"]) for c in out["commands"]] == [("Drifted", ["node-1"])]


def claim_of(node: str, it: str, initialized: str, pod_event: str = "") -> str:
    event = f"\n  lastPodEventTime: '{pod_event}'" if pod_event else ""
    return f"""\
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {node}
  creationTimestamp: '2026-11-01T00:00:00Z'
  labels: {{karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: {it}}}
spec: {{nodeClassRef: {{group: x, kind: X, name: x}}}}
status:
  providerID: 'fake://{node}'
  nodeName: {node}
  conditions:
    - {{type: Launched, status: 'True', lastTransitionTime: '2026-11-01T00:00:10Z'}}
    - {{type: Registered, status: 'True', lastTransitionTime: '2026-11-01T00:01:00Z'}}
    - {{type: Initialized, status: 'True', lastTransitionTime: '{initialized}'}}{event}
"""


@pytest.mark.parametrize(
    ("pod_event", "now", "emptied"),
    [
        pytest.param("", "2026-11-22T23:55:00Z", False, id="initialized-5m-ago-waits"),
        pytest.param("", "2026-11-23T00:05:00Z", True, id="initialized-15m-ago-empty"),
        pytest.param(
            "2026-11-22T23:58:00Z", "2026-11-23T00:05:00Z", False, id="pod-event-restarts"
        ),
    ],
)
def test_consolidate_after_counts_from_initialized(pod_event: str, now: str, emptied: bool) -> None:
    """With --respect-consolidate-after an empty node created weeks ago but initialized at
    23:50 is emptied once consolidateAfter (10m) has passed since that transition (or since a
    later pod event), as the Consolidatable condition says, not from its creation."""
    pool = """\
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template: {spec: {}}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 10m, budgets: [{nodes: 100%}]}
"""
    scenario = (
        CATALOG
        + pool
        + managed("node-1", "fake-it-3", 4, zone="test-zone-1")
        + claim_of("node-1", "fake-it-3", "2026-11-22T23:50:00Z", pod_event)
    )
    out = simulate(scenario, "--disruption", "--now", now, "--respect-consolidate-after")
    assert [c["nodes"] for c in out["commands"]] == ([["node-1"]] if emptied else [])
    # the contract's default counts consolidateAfter as elapsed
    assert [c["nodes"] for c in simulate(scenario, "--disruption", "--now", now)["commands"]] == [
        ["node-1"]
    ]
