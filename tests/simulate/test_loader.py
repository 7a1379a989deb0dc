"""The scenario loader: every kind decodes, Lists unpack, bad input is one precise line."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter.simulate import loader
from karpenter.simulate.loader import ScenarioError

CATALOG = """
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceTypeCatalog
spec: {preset: fake, count: 4}
"""

EVERY_KIND = (
    CATALOG
    + """
---
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceType
metadata: {name: m5.large}
spec:
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  overhead: {cpu: 70m, memory: 574Mi}
  requirements:
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  offerings:
    - {zone: us-west-2a, capacityType: on-demand, price: 0.096}
    - {zone: us-west-2a, capacityType: spot, price: 0.035, available: false}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata: {labels: {team: a}}
    spec:
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
      taints: [{key: dedicated, value: a, effect: NoSchedule}]
      expireAfter: Never
  disruption: {consolidateAfter: 30s, budgets: [{nodes: "1", schedule: "@daily", duration: 1h}]}
  limits: {cpu: "100"}
  weight: 10
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: cheaper}
spec: {priceAdjustment: "-10%", weight: 5}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-abc, labels: {karpenter.sh/nodepool: default}}
spec: {requirements: [{key: karpenter.sh/nodepool, operator: In, values: [default]}]}
status:
  providerID: fake://abc
  nodeName: node-a
  capacity: {cpu: "4"}
  conditions: [{type: Registered, status: "True"}]
---
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {karpenter.sh/nodepool: default},
           creationTimestamp: "2024-01-01T00:00:00Z"}
spec: {providerID: fake://abc, taints: [{key: k, effect: NoExecute}]}
status: {capacity: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec:
  initContainers:
    - {name: sidecar, restartPolicy: Always, resources: {requests: {cpu: 500m}}}
    - {name: init, resources: {requests: {cpu: "3"}}}
    - {name: late-sidecar, restartPolicy: Always, resources: {requests: {cpu: 100m}}}
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: data}}, {name: e, ephemeral: {}}]
  priority: 7
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec: {nodeName: node-a, containers: [{name: c}]}
---
apiVersion: v1
kind: Pod
metadata: {name: done, namespace: shop}
spec: {containers: [{name: c}]}
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata:
  name: logs-x
  namespace: kube-system
  ownerReferences: [{kind: DaemonSet, name: logs, apiVersion: apps/v1, controller: true}]
spec: {containers: [{name: c}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs, namespace: kube-system}
spec:
  template:
    metadata: {labels: {app: logs}}
    spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {minAvailable: 0, selector: {matchLabels: {app: web}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
spec: {storageClassName: gp3, volumeName: pv-1}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  csi: {driver: ebs.csi.aws.com}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [z1]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [z1, z2]}]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-a}
spec: {drivers: [{name: ebs.csi.aws.com, allocatable: {count: 25}}]}
"""
)


def _load(text: str, gates: str = "") -> loader.Scenario:
    from karpenter.settings import Settings  # noqa: PLC0415 - only this helper needs it

    settings = Settings(FEATURE_GATES=gates) if gates else None
    return loader.load(["-"], text, settings)


def test_every_kind_decodes() -> None:
    """One document of every kind in the contract's table lands in the snapshot."""
    s = _load(EVERY_KIND)
    c = s.cluster
    assert [p.name for p in c.nodepools] == ["default"]
    pool = c.nodepools[0]
    assert pool.template.expire_after is None
    assert pool.disruption.consolidate_after == 30.0
    assert pool.disruption.budgets[0].duration_seconds == 3600.0
    assert pool.weight == 10
    assert len(c.instance_types["default"]) == 5
    assert [o.available for o in c.instance_types["default"][0].offerings] == [True, False]
    assert c.nodeclaims[0].launched and c.nodeclaims[0].registered
    assert not c.nodeclaims[0].initialized
    node = c.nodes[0]
    assert node.ready and node.allocatable == node.capacity
    assert node.creation == 1704067200.0
    assert [p.key for p in s.pending] == ["shop/web-1"]
    web = s.pending[0]
    assert web.requests["cpu"] == 3500  # max(1 + 0.5 + 0.1 sidecars, 3 init + 0.5 earlier sidecar)
    assert web.pvc_names == ("data",) and web.ephemeral_volume_count == 1
    assert web.priority == 7
    assert len(c.pods) == 4
    assert c.daemonsets[0].template.requests["cpu"] == 100
    assert c.pdbs[0].disruptions_allowed == 1  # one bound pod, minAvailable 0
    assert c.pvcs[0].volume_name == "pv-1"
    assert c.pvs[0].csi_driver == "ebs.csi.aws.com"
    assert c.storage_classes[0].allowed_topologies[0][0][2] == ("z1", "z2")
    assert c.csinodes[0].limits == {"ebs.csi.aws.com": 25}
    assert c.overlays[0].price_adjustment == "-10%"
    assert set(c.namespace_labels) == {"shop", "kube-system"}
    assert c.namespace_labels["shop"] == {"kubernetes.io/metadata.name": "shop"}


def test_overlays_apply_only_behind_the_gate() -> None:
    """NodeOverlay prices change the catalog only when the NodeOverlay gate is on."""
    off = _load(EVERY_KIND).cluster.instance_types["default"]
    on = _load(EVERY_KIND, "NodeOverlay=true").cluster.instance_types["default"]
    assert on[0].offerings[0].price == pytest.approx(off[0].offerings[0].price * 0.9)


def test_list_unpacking() -> None:
    """A kind: List document contributes each of its items."""
    text = (
        CATALOG
        + """
---
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c}]}}
  - {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: [{name: c}]}}
"""
    )
    assert [p.key for p in _load(text).pending] == ["default/a", "default/b"]


@pytest.mark.parametrize(
    ("spec", "allowed"),
    [
        pytest.param("{minAvailable: 1, selector: {}}", 2, id="min-available"),
        pytest.param("{minAvailable: '50%', selector: {}}", 1, id="min-available-percent"),
        pytest.param("{maxUnavailable: 1, selector: {}}", 0, id="max-unavailable-counts-pending"),
        pytest.param("{maxUnavailable: '100%', selector: {}}", 3, id="max-unavailable-all"),
        pytest.param("{minAvailable: 0}", 0, id="null-selector-matches-nothing"),
        pytest.param("{selector: {}}\nstatus: {disruptionsAllowed: 5}", 5, id="status-wins"),
    ],
)
def test_pdb_allowance(spec: str, allowed: int) -> None:
    """Without a status a PDB's allowance is computed from the bound pods it selects."""
    pods = "".join(
        f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\n"
        f"spec: {{containers: [{{name: c}}]{', nodeName: n' if i < 3 else ''}}}\n"
        for i in range(4)
    )
    text = f"{CATALOG}{pods}---\napiVersion: policy/v1\nkind: PodDisruptionBudget\n"
    text += f"metadata: {{name: b}}\nspec: {spec}\n"
    assert _load(text).cluster.pdbs[0].disruptions_allowed == allowed


def test_files_and_stdin(tmp_path: Path) -> None:
    """Documents from files and from stdin ('-') are merged into one snapshot."""
    path = tmp_path / "catalog.yaml"
    path.write_text(CATALOG, encoding="utf-8")
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n"
    scenario = loader.load([str(path), "-"], pod)
    assert [p.key for p in scenario.pending] == ["default/a"]


def test_every_pool_gets_the_catalog() -> None:
    """Every NodePool maps to the whole catalog (explicit types and presets together)."""
    pools = "".join(
        f"---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {n}}}\n"
        for n in ("a", "b")
    )
    types = _load(CATALOG + pools).cluster.instance_types
    assert {k: len(v) for k, v in types.items()} == {"a": 4, "b": 4}


POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"
POOL = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n"


def _pool_req(req: str) -> str:
    return POOL + f"  template: {{spec: {{requirements: [{req}]}}}}\n"


BAD = [
    pytest.param("kind: Foo\n", "document 2 (Foo): kind: unknown kind 'Foo'", id="unknown-kind"),
    pytest.param(
        "apiVersion: v2\nkind: Pod\nmetadata: {name: p}\n",
        "document 2 (Pod p): apiVersion: Pod needs v1",
        id="wrong-api-version",
    ),
    pytest.param(
        POD.replace("[{name: c}]", "[{name: c, resources: {requests: {cpu: abc}}}]"),
        "document 2 (Pod p): spec.containers[0].resources.requests.cpu: invalid quantity 'abc'",
        id="bad-quantity",
    ),
    pytest.param(
        POD + "---\n" + POD, "document 3 (Pod p): metadata.name: duplicate Pod", id="duplicate"
    ),
    pytest.param(
        POD.replace("[{name: c}]", "[{name: c, resources: {limits: {memory: null}}}]"),
        "spec.containers[0].resources.limits.memory: invalid quantity None",
        id="null-quantity",
    ),
    pytest.param(
        _pool_req("{key: a, operator: Near, values: [x]}"),
        "document 2 (NodePool np): spec.template.spec.requirements[0].operator",
        id="bad-operator",
    ),
    pytest.param(
        _pool_req("{key: a, operator: In}"),
        "spec.template.spec.requirements[0]: values: operator In needs at least one value",
        id="in-without-values",
    ),
    pytest.param(
        POOL + "  limits: {cpu: '-1', memory: 4Gi}\n",
        "document 2 (NodePool np): spec.limits: limits must not be negative (cpu)",
        id="negative-limit",
    ),
    pytest.param(
        _pool_req("{key: a, operator: Gt, values: ['-1']}"),
        "spec.template.spec.requirements[0]: values: operator Gt needs one non-negative integer",
        id="gt-negative",
    ),
    pytest.param(
        _pool_req("{key: a, operator: In, values: [x], minValues: 2}"),
        "requirements[0]: minValues 2 exceeds the 1 values",
        id="min-values-above-values",
    ),
    pytest.param(
        _pool_req("{key: a, operator: Exists, minValues: 51}"),
        "spec.template.spec.requirements[0].minValues",
        id="min-values-range",
    ),
    pytest.param(
        _pool_req("{key: karpenter.sh/nodepool, operator: In, values: [x]}"),
        "requirements[0].key: label karpenter.sh/nodepool is restricted",
        id="nodepool-requirement",
    ),
    pytest.param(
        _pool_req("{key: karpenter.sh/other, operator: Exists}"),
        "requirements[0].key: label domain karpenter.sh is restricted",
        id="restricted-domain",
    ),
    pytest.param(
        POOL + "  template: {metadata: {labels: {kubernetes.io/hostname: x}}}\n",
        "spec.template.metadata.labels: kubernetes.io/hostname: label kubernetes.io/hostname is",
        id="hostname-label",
    ),
    pytest.param(
        POOL + "  template: {spec: {taints: [{key: a, effect: Sometimes}]}}\n",
        "spec.template.spec.taints[0].effect",
        id="taint-effect",
    ),
    pytest.param(
        POOL + "  template: {spec: {taints: [{key: a, effect: NoSchedule}],"
        " startupTaints: [{key: a, effect: NoSchedule}]}}\n",
        "spec.template.spec: duplicate taint a:NoSchedule",
        id="duplicate-taint",
    ),
    pytest.param(
        POOL + "  disruption: {budgets: [{nodes: '150%'}]}\n",
        "spec.disruption.budgets[0].nodes",
        id="budget-nodes",
    ),
    pytest.param(
        POOL + "  disruption: {budgets: [{nodes: '1', schedule: '@daily'}]}\n",
        "spec.disruption.budgets[0]: 'schedule' must be set with 'duration'",
        id="schedule-without-duration",
    ),
    pytest.param(POOL + "  weight: 101\n", "(NodePool np): spec.weight", id="weight"),
    pytest.param(
        POOL + "  template: {spec: {expireAfter: 30d}}\n",
        "spec.template.spec.expireAfter: invalid duration '30d'",
        id="expire-after",
    ),
    pytest.param(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: o}\n"
        "spec: {price: '1', priceAdjustment: '+1'}\n",
        "(NodeOverlay o): spec: cannot set both 'price' and 'priceAdjustment'",
        id="overlay-price-exclusive",
    ),
    pytest.param(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: o}\n"
        "spec: {priceAdjustment: '-150%'}\n",
        "spec.priceAdjustment: priceAdjustment '-150%' is invalid",
        id="overlay-adjustment",
    ),
    pytest.param(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: o}\n"
        "spec: {capacity: {cpu: '1'}}\n",
        "spec.capacity: may only set extended resources, not cpu",
        id="overlay-capacity",
    ),
    pytest.param(
        POD.replace("spec: {", "spec: {tolerations: [{key: a, operator: Near}], "),
        "spec.tolerations[0].operator",
        id="bad-toleration",
    ),
    pytest.param(
        POD.replace(
            "spec: {", "spec: {topologySpreadConstraints: [{maxSkew: 0, topologyKey: z}], "
        ),
        "spec.topologySpreadConstraints[0].maxSkew: must be a positive integer",
        id="bad-spread",
    ),
    pytest.param(
        "apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}\n",
        "document 2 (Node): metadata.name: required",
        id="node-without-name",
    ),
    pytest.param(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, creationTimestamp: yesterday}\n",
        "(Node n): metadata.creationTimestamp: invalid timestamp 'yesterday'",
        id="bad-timestamp",
    ),
    pytest.param(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\n"
        "spec: {minAvailable: 1, maxUnavailable: 1}\n",
        "(PodDisruptionBudget b): spec: minAvailable and maxUnavailable are mutually exclusive",
        id="pdb-both",
    ),
    pytest.param(
        "apiVersion: simulation.karpenter.sh/v1alpha1\nkind: InstanceType\nmetadata: {name: t}\n"
        "spec: {capacity: {cpu: '1'}, offerings: [{zone: z, capacityType: spot, price: x}]}\n",
        "(InstanceType t): spec.offerings[0].price: must be a non-negative number",
        id="instance-type-price",
    ),
    pytest.param(
        "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod, metadata: {name: a},"
        " spec: {priority: high}}]\n",
        "document 2 items[0] (Pod a): spec.priority: expected an integer",
        id="list-item",
    ),
    pytest.param("a: [1,\n", "invalid YAML at line 7", id="bad-yaml"),
    pytest.param("- 1\n", "document 2: expected a Kubernetes object", id="not-an-object"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD)
def test_bad_input_is_one_line_naming_document_and_field(text: str, fragment: str) -> None:
    """Bad input raises ScenarioError: one line naming the source, document, object and field."""
    with pytest.raises(ScenarioError) as info:
        _load(CATALOG + "---\n" + text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("<stdin>: ")
    assert fragment in message


def test_aws_preset_is_the_default_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without catalog documents the aws preset of AWS_REGION supplies real EC2 types."""
    monkeypatch.setenv("AWS_REGION", "us-east-2")
    monkeypatch.setenv("AWS_PRICE_FILE", "")
    scenario = _load(
        POD + "---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: d}\n"
    )
    types = {t.name: t for t in scenario.cluster.instance_types["d"]}
    assert "m5.large" in types
    assert types["m5.large"].requirements["topology.kubernetes.io/region"].values == {"us-east-2"}


def test_aws_preset_bad_price_file(tmp_path: Path) -> None:
    """A price file without the region's prices is refused, naming priceFile."""
    (tmp_path / "p.json").write_text('{"onDemand": {"eu-west-9": {}}}')
    text = CATALOG.replace("fake, count: 4", "aws, region: us-west-2, priceFile: p.json")
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(ScenarioError, match=r"priceFile: .*no prices for us-west-2"):
        loader.load([str(tmp_path / "s.yaml")], None)


def test_unreadable_file(tmp_path: Path) -> None:
    """A missing file is named in the error."""
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ScenarioError, match=r"nope\.yaml: cannot read"):
        loader.load([str(missing)], None)
