"""The EC2NodeClass pydantic model: the CRD's rules with its messages, and to_core."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from karpenter.providers.aws.api.ec2nodeclass import EC2NodeClassDoc, from_manifest
from karpenter.providers.aws.api.ec2nodeclass_status import status_doc, status_from_doc
from karpenter.providers.aws.core import nodeclass as nc

BASE: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default", "uid": "u-1", "generation": 3},
    "spec": {
        "role": "KarpenterNodeRole-demo",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    },
}


def doc(**spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    for key, value in spec.items():
        if value is None:
            out["spec"].pop(key, None)
        else:
            out["spec"][key] = value
    return out


def test_to_core() -> None:
    """A manifest converts to the core value: sizes in bytes, the kubelet kept raw."""
    got = EC2NodeClassDoc.model_validate(
        doc(
            blockDeviceMappings=[
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "100Gi"}}
            ],
            kubelet={"maxPods": 110, "kubeReserved": {"cpu": "100m"}},
            tags={"team": "a"},
        )
    ).to_core()
    assert (got.name, got.uid, got.generation) == ("default", "u-1", 3)
    assert got.resolved_family() == "AL2023"
    assert got.spec.block_device_mappings[0].volume_size_bytes == 100 * 2**30
    assert got.spec.kubelet.max_pods == 110
    assert got.spec.kubelet_raw == {"maxPods": 110, "kubeReserved": {"cpu": "100m"}}
    assert got.spec.metadata_options.http_tokens == "required"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"role": None}, "must specify exactly one of ['role', 'instanceProfile']", id="no-role"
        ),
        pytest.param({"role": ""}, "role cannot be empty", id="empty-role"),
        pytest.param(
            {"subnetSelectorTerms": [{}]},
            "expected at least one, got none, ['tags', 'id']",
            id="empty-term",
        ),
        pytest.param(
            {"securityGroupSelectorTerms": [{"id": "sg-1", "name": "x"}]},
            "'id' is mutually exclusive",
            id="sg-id",
        ),
        pytest.param(
            {"amiSelectorTerms": [{"alias": "ubuntu@latest"}]}, "invalid alias", id="alias-family"
        ),
        pytest.param(
            {"amiSelectorTerms": [{"id": "ami-1"}]},
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
            id="needs-family",
        ),
        pytest.param(
            {"amiFamily": "Bottlerocket"},
            "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
            id="family-mismatch",
        ),
        pytest.param(
            {"tags": {"kubernetes.io/cluster/x": "owned"}},
            "tag contains a restricted tag matching kubernetes.io/cluster/x",
            id="restricted-tag",
        ),
        pytest.param(
            {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]},
            "snapshotID or volumeSize must be defined",
            id="ebs-size",
        ),
    ],
)
def test_rules(spec: dict[str, Any], message: str) -> None:
    """Each CRD rule refuses the manifest with the CRD's message."""
    with pytest.raises(ValidationError) as info:
        EC2NodeClassDoc.model_validate(doc(**spec))
    assert message in str(info.value)


def test_status_doc() -> None:
    """The status renders with CRD field names and stamped conditions."""
    status = nc.Status(
        subnets=(nc.Subnet("subnet-1", "us-east-1a", "use1-az1"),),
        amis=(nc.AMI("ami-1", "n", False, (("kubernetes.io/arch", "In", ("amd64",)),)),),
        conditions=nc.with_ready((nc.Condition("SubnetsReady", "True", "SubnetsReady"),)),
    )
    out = status_doc(status, "2026-01-01T00:00:00Z")
    assert out["subnets"] == [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}]
    assert out["amis"][0]["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
    ]
    assert [c["type"] for c in out["conditions"]] == ["SubnetsReady", "Ready"]


def test_status_round_trip_and_from_manifest() -> None:
    """status_doc and status_from_doc are inverses; from_manifest reads spec and status."""
    status = nc.Status(
        subnets=(nc.Subnet("subnet-1", "us-east-1a", "use1-az1"),),
        security_groups=(nc.SecurityGroup("sg-1", "nodes"),),
        amis=(nc.AMI("ami-1", "n", False, (("kubernetes.io/arch", "In", ("amd64",)),)),),
        instance_profile="demo_1",
        conditions=nc.with_ready((nc.Condition("SubnetsReady", "True", "SubnetsReady"),)),
    )
    raw = status_doc(status, "2026-01-01T00:00:00Z")
    assert status_from_doc(raw) == status
    got = from_manifest({**doc(), "status": raw})
    assert got.status == status and got.status.ready() == "True"


def test_kubelet_hash_is_the_sorted_map() -> None:
    """Any kubelet field, known to Karpenter or not, drifts the class; key order does not."""
    a = EC2NodeClassDoc.model_validate(doc(kubelet={"maxPods": 110, "registryBurst": 20}))
    b = EC2NodeClassDoc.model_validate(doc(kubelet={"registryBurst": 20, "maxPods": 110}))
    c = EC2NodeClassDoc.model_validate(doc(kubelet={"maxPods": 110, "registryBurst": 21}))
    assert nc.static_hash(a.to_core()) == nc.static_hash(b.to_core())
    assert nc.static_hash(a.to_core()) != nc.static_hash(c.to_core())
