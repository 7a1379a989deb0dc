"""Launch planning, user data, tags, AMI selection and drift: the pure launch path."""

from __future__ import annotations

import json
import tomllib

import pytest

from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import NodeClaim
from karpenter.core.scheduling.taints import Taint
from karpenter.providers.aws.core import amis, catalog, drift, launch, pricing, tags, userdata
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core.capacity import Kubelet
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.nodeclass import AMI, SecurityGroup, Status, Subnet
from karpenter.providers.aws.core.subnets import InflightIPs

ZONES = ("us-east-1a", "us-east-1b")
TYPES = ("m5.large", "c5.large", "m5.xlarge", "g4dn.xlarge", "m5.metal")
PRICES = {
    "m5.large": 0.096,
    "c5.large": 0.085,
    "m5.xlarge": 0.192,
    "g4dn.xlarge": 0.526,
    "m5.metal": 4.6,
}
STD = amis.Image("ami-std", "al2023-std", "x86_64", "2026-01-02T00:00:00Z", variant="standard")
GPU = amis.Image("ami-gpu", "al2023-gpu", "x86_64", "2026-01-02T00:00:00Z", variant="nvidia")


@pytest.fixture
def types(ec2: dict[str, InstanceTypeInfo]) -> tuple[InstanceType, ...]:
    inp = catalog.CatalogInput(
        region="us-east-1",
        zones=dict.fromkeys(TYPES, ZONES),
        prices=pricing.PriceTable("us-east-1", PRICES, {}, {k: v / 3 for k, v in PRICES.items()}),
    )
    return catalog.build([ec2[t] for t in TYPES], inp)


SUBNETS = (
    Subnet("subnet-a1", "us-east-1a", available_ips=10),
    Subnet("subnet-a2", "us-east-1a", available_ips=200),
    Subnet("subnet-b", "us-east-1b", available_ips=50),
)


def claim(*reqs: tuple[str, str, tuple[str, ...], int | None], cpu: int = 1000) -> NodeClaim:
    return NodeClaim("c", requirements=reqs, requests={"cpu": cpu})


def test_plan_prefers_spot_and_orders_by_price(types: tuple[InstanceType, ...]) -> None:
    """Spot when allowed; cheapest first; best subnet per zone; exotic types left out."""
    images = amis.select([STD, GPU], "2026-06-01T00:00:00Z")
    plan = launch.plan(claim(), types, SUBNETS, images)
    assert plan.capacity_type == "spot"
    assert plan.overrides[0].instance_type == "c5.large"
    assert {o.subnet_id for o in plan.overrides} == {"subnet-a2", "subnet-b"}
    assert "g4dn.xlarge" not in plan.instance_types and "m5.metal" not in plan.instance_types
    assert plan.images() == ("ami-std",)
    prices = [o.price for o in plan.overrides]
    assert prices == sorted(prices)


def test_plan_on_demand_and_zone_and_gpu(types: tuple[InstanceType, ...]) -> None:
    """Requirements pin capacity type and zone; a GPU request gets the nvidia AMI."""
    images = amis.select([STD, GPU], "2026-06-01T00:00:00Z")
    od = claim(
        ("karpenter.sh/capacity-type", "In", ("on-demand",), None),
        ("topology.kubernetes.io/zone", "In", ("us-east-1b",), None),
    )
    plan = launch.plan(od, types, SUBNETS, images)
    assert plan.capacity_type == "on-demand"
    assert {o.zone for o in plan.overrides} == {"us-east-1b"}
    gpu = claim((awslbl.GPU_COUNT, "Exists", (), None))
    gplan = launch.plan(gpu, types, SUBNETS, images)
    assert gplan.instance_types == ("g4dn.xlarge",)
    assert gplan.images() == ("ami-gpu",)


def test_plan_no_capacity(types: tuple[InstanceType, ...]) -> None:
    """Nothing fits: NoCapacityError with upstream's message."""
    with pytest.raises(launch.NoCapacityError, match=r"all requested instance types"):
        launch.plan(claim(cpu=10**9), types, SUBNETS, amis.select([STD], "2026"))
    with pytest.raises(launch.NoCapacityError, match="no capacity offerings"):
        launch.plan(claim(), types, (), amis.select([STD], "2026"))


def test_ami_selection_prefers_non_deprecated_newest() -> None:
    """Per requirement set: non-deprecated beats newer-but-deprecated, newest otherwise."""
    old = amis.Image("ami-old", "a", "x86_64", "2025-01-01T00:00:00Z")
    new_dep = amis.Image("ami-new", "b", "x86_64", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z")
    arm = amis.Image("ami-arm", "c", "arm64", "2025-06-01T00:00:00Z")
    got = amis.select([old, new_dep, arm], "2026-03-01T00:00:00Z")
    assert [a.id for a in got] == ["ami-arm", "ami-old"]
    before = amis.select([old, new_dep], "2026-01-15T00:00:00Z")
    assert [a.id for a in before] == ["ami-new"]


def test_al2023_nodeadm_user_data() -> None:
    """AL2023: a MIME archive ending in Karpenter's NodeConfig with taints and max pods."""
    opts = userdata.Options(
        "demo",
        "https://k8s.example",
        "Q0E=",
        "10.100.0.0/16",
        "10.100.0.10",
        {"team": "a"},
        (Taint("karpenter.sh/unregistered", "NoExecute"),),
        29,
        Kubelet(kube_reserved={"cpu": "70m"}),
        custom="#!/bin/bash\necho hi",
    )
    text = userdata.render("AL2023", opts)
    assert text.startswith("MIME-Version: 1.0")
    assert "text/x-shellscript" in text and "echo hi" in text
    body = text.split(userdata.NODEADM_MARKER, 1)[1].split("\n--//", 1)[0]
    doc = json.loads(body)
    assert doc["kind"] == "NodeConfig"
    assert doc["spec"]["cluster"]["cidr"] == "10.100.0.0/16"
    config = doc["spec"]["kubelet"]["config"]
    assert config["maxPods"] == 29 and config["clusterDNS"] == ["10.100.0.10"]
    assert config["registerWithTaints"] == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
    ]
    assert doc["spec"]["kubelet"]["flags"] == ['--node-labels="team=a"']


def test_al2023_node_config_carries_the_whole_kubelet_map() -> None:
    """AL2023: every spec.kubelet field reaches nodeadm; Karpenter's resolved values win."""
    raw: dict[str, object] = {
        "registryBurst": 20,
        "featureGates": {"InPlacePodVerticalScaling": True},
        "maxPods": "min(110, vcpus * 20)",
        "kubeReserved": {"cpu": "max(60, vcpus * 30)"},
        "clusterDNS": ["10.100.0.10", "10.100.0.11"],
    }
    opts = userdata.Options(
        "demo",
        "https://k8s.example",
        cluster_dns="10.100.0.10",
        max_pods=40,
        kubelet=Kubelet(kube_reserved={"cpu": "60m"}, cluster_dns=("10.100.0.10", "10.100.0.11")),
        kubelet_config=raw,
    )
    body = userdata.render("AL2023", opts).split(userdata.NODEADM_MARKER, 1)[1]
    config = json.loads(body.split("\n--//", 1)[0])["spec"]["kubelet"]["config"]
    assert config == {
        "clusterDNS": ["10.100.0.10", "10.100.0.11"],
        "featureGates": {"InPlacePodVerticalScaling": True},
        "kubeReserved": {"cpu": "60m"},
        "maxPods": 40,
        "registryBurst": 20,
    }


def test_bottlerocket_toml_merges_user_settings() -> None:
    """Bottlerocket keeps the user's settings and overwrites the cluster ones."""
    custom = (
        '[settings.kubernetes]\ncluster-name = "wrong"\n'
        "[settings.host-containers.admin]\nenabled = true\n"
    )
    opts = userdata.Options(
        "demo",
        "https://k8s",
        "Q0E=",
        labels={"a": "b"},
        max_pods=58,
        custom=custom,
        taints=(Taint("dedicated", "NoSchedule", "gpu"),),
        raid0=True,
    )
    doc = tomllib.loads(userdata.render("Bottlerocket", opts))
    kube = doc["settings"]["kubernetes"]
    assert kube["cluster-name"] == "demo" and kube["max-pods"] == 58
    assert kube["node-labels"] == {"a": "b"}
    assert kube["node-taints"] == {"dedicated": ["gpu:NoSchedule"]}
    assert doc["settings"]["host-containers"]["admin"]["enabled"] is True
    assert "000-mount-instance-storage" in doc["settings"]["bootstrap-commands"]


def test_al2_bootstrap_and_custom_passthrough() -> None:
    """AL2 calls bootstrap.sh with kubelet flags; Custom is passed through verbatim."""
    opts = userdata.Options(
        "demo", "https://k8s", "Q0E=", cluster_dns="10.0.0.10", max_pods=29, custom="echo x"
    )
    text = userdata.render("AL2", opts)
    assert "/etc/eks/bootstrap.sh 'demo'" in text and "--max-pods=29" in text
    assert "--use-max-pods false" in text and "--dns-cluster-ip '10.0.0.10'" in text
    assert userdata.render("Custom", opts) == "echo x"


STATIC_KUBELET: dict[str, object] = {
    "evictionSoft": {"memory.available": "5%"},
    "evictionSoftGracePeriod": {"memory.available": "1m"},
    "evictionMaxPodGracePeriod": 30,
    "imageGCHighThresholdPercent": 85,
    "imageGCLowThresholdPercent": 80,
    "cpuCFSQuota": False,
}


def test_al2_renders_every_managed_field() -> None:
    """AL2 flags carry the managed fields that have no capacity effect too."""
    opts = userdata.Options("demo", "https://k8s", max_pods=29, kubelet_config=STATIC_KUBELET)
    flags = userdata.kubelet_flags(opts)
    assert flags == [
        "--max-pods=29",
        '--eviction-soft="memory.available<5%"',
        '--eviction-soft-grace-period="memory.available=1m"',
        "--eviction-max-pod-grace-period=30",
        "--image-gc-high-threshold=85",
        "--image-gc-low-threshold=80",
        "--cpu-cfs-quota=false",
    ]


def test_bottlerocket_renders_every_managed_field() -> None:
    """Bottlerocket settings carry them too (GC thresholds as strings, as upstream)."""
    opts = userdata.Options("demo", "https://k8s", max_pods=29, kubelet_config=STATIC_KUBELET)
    kube = tomllib.loads(userdata.render("Bottlerocket", opts))["settings"]["kubernetes"]
    assert kube["eviction-soft"] == {"memory.available": "5%"}
    assert kube["eviction-soft-grace-period"] == {"memory.available": "1m"}
    assert kube["eviction-max-pod-grace-period"] == 30
    assert (kube["image-gc-high-threshold-percent"], kube["image-gc-low-threshold-percent"]) == (
        "85",
        "80",
    )
    assert kube["cpu-cfs-quota-enforced"] is False


def test_tags_and_names() -> None:
    """Ownership tags override spec.tags; restricted keys are refused; names are stable."""
    got = tags.instance_tags({"team": "a", "karpenter.sh/nodepool": "x"}, "demo", "default", "nc")
    assert got["kubernetes.io/cluster/demo"] == "owned"
    assert got["karpenter.sh/nodepool"] == "default"
    assert got["eks:eks-cluster-name"] == "demo" and got["karpenter.k8s.aws/ec2nodeclass"] == "nc"
    with pytest.raises(tags.TagError, match=r"restricted tag matching kubernetes\.io/cluster/x"):
        tags.validate({"kubernetes.io/cluster/x": "owned"})
    a = tags.launch_template_name({"ami": "ami-1", "sg": ["a", "b"]})
    assert a == tags.launch_template_name({"sg": ["a", "b"], "ami": "ami-1"})
    assert a != tags.launch_template_name({"ami": "ami-2", "sg": ["a", "b"]})
    assert a.startswith("karpenter.k8s.aws/")
    assert tags.instance_id(tags.provider_id("us-east-1a", "i-123")) == "i-123"
    assert tags.instance_id("kwok://x") == ""


def test_drift_order() -> None:
    """Hash drift first, then AMI, security groups, subnet; none when all match."""
    status = Status(
        subnets=(Subnet("subnet-a", "us-east-1a"),),
        security_groups=(SecurityGroup("sg-1"),),
        amis=(AMI("ami-1"),),
    )
    facts = drift.InstanceFacts("ami-1", "subnet-a", frozenset({"sg-1"}))
    h = {awslbl.ANNOTATION_NODECLASS_HASH: "1", awslbl.ANNOTATION_NODECLASS_HASH_VERSION: "v6"}
    h2 = {**h, awslbl.ANNOTATION_NODECLASS_HASH: "2"}
    assert drift.drift_reason(facts, status, AMI("ami-1"), h, h) == ""
    assert drift.drift_reason(facts, status, AMI("ami-1"), h, h2) == drift.NODECLASS_DRIFT
    assert drift.drift_reason(facts, status, AMI("ami-2"), h, h) == drift.AMI_DRIFT
    sg = drift.InstanceFacts("ami-1", "subnet-a", frozenset({"sg-2"}))
    assert drift.drift_reason(sg, status, AMI("ami-1"), h, h) == drift.SECURITY_GROUP_DRIFT
    sn = drift.InstanceFacts("ami-1", "subnet-z", frozenset({"sg-1"}))
    assert drift.drift_reason(sn, status, AMI("ami-1"), h, h) == drift.SUBNET_DRIFT
    other_version = {**h2, awslbl.ANNOTATION_NODECLASS_HASH_VERSION: "v5"}
    assert drift.drift_reason(facts, status, AMI("ami-1"), h, other_version) == ""


def test_spot_pricier_than_on_demand_is_dropped(ec2: dict[str, InstanceTypeInfo]) -> None:
    """With both capacity types allowed, spot types dearer than the cheapest on-demand go."""
    inp = catalog.CatalogInput(
        region="us-east-1",
        zones=dict.fromkeys(("m5.large", "c5.large"), ZONES),
        prices=pricing.PriceTable(
            "us-east-1",
            {"m5.large": 0.096, "c5.large": 0.085},
            {},
            {"m5.large": 0.2, "c5.large": 0.03},
        ),
    )
    types = catalog.build([ec2["m5.large"], ec2["c5.large"]], inp)
    plan = launch.plan(claim(), types, SUBNETS, amis.select([STD], "2026"))
    assert plan.capacity_type == "spot"
    assert plan.instance_types == ("c5.large",)


def test_inflight_ips_steer_the_next_launch() -> None:
    """IPs used by our launches count until EC2's free count changes."""
    tracker = InflightIPs()
    a, b = (
        Subnet("subnet-a", "us-east-1a", available_ips=59),
        Subnet("subnet-b", "us-east-1a", available_ips=50),
    )
    assert launch.best_subnets(tracker.adjust([a, b]))["us-east-1a"].id == "subnet-a"
    tracker.consume("subnet-a", 30)
    assert launch.best_subnets(tracker.adjust([a, b]))["us-east-1a"].id == "subnet-b"
    refreshed = Subnet("subnet-a", "us-east-1a", available_ips=58)  # EC2 caught up
    assert {s.available_ips for s in tracker.adjust([refreshed])} == {58}


def test_min_values_must_survive_truncation(types: tuple[InstanceType, ...]) -> None:
    """A claim asking for more families than can launch fails unless BestEffort."""
    picky = claim(("karpenter.k8s.aws/instance-family", "Exists", (), 10))
    with pytest.raises(launch.NoCapacityError, match="minValues"):
        launch.plan(picky, types, SUBNETS, amis.select([STD], "2026"))
    relaxed = launch.plan(
        picky, types, SUBNETS, amis.select([STD], "2026"), min_values_best_effort=True
    )
    assert relaxed.instance_types


def test_plan_ignores_the_claims_custom_labels(types: tuple[InstanceType, ...]) -> None:
    """NodePool template labels reach the claim as requirements no type defines; the types
    still serve it (upstream checks the type's keys against the claim, not the reverse)."""
    images = amis.select([STD, GPU], "2026-06-01T00:00:00Z")
    custom = claim(("team.example.com/pool", "In", ("batch",), None))
    assert launch.plan(custom, types, SUBNETS, images).overrides
    wrong_arch = claim(("kubernetes.io/arch", "In", ("arm64",), None))
    with pytest.raises(launch.NoCapacityError):
        launch.plan(wrong_arch, types, SUBNETS, images)
