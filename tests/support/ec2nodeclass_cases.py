"""EC2NodeClass manifests and the verdict the CRD gives each: shared by the e2e truth table
(real apiserver) and the pydantic model's parity test."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from typing import Any

GROUP, VERSION, PLURAL = "karpenter.k8s.aws", "v1", "ec2nodeclasses"
DISCOVERY = [{"tags": {"karpenter.sh/discovery": "demo"}}]


def base() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EC2NodeClass",
        "metadata": {"name": f"case-{uuid.uuid4().hex[:10]}"},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": copy.deepcopy(DISCOVERY),
            "securityGroupSelectorTerms": copy.deepcopy(DISCOVERY),
        },
    }


def merge(into: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    # JSON-merge-patch semantics (None deletes, lists replace) keep the table rows short.
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


@dataclass(frozen=True)
class Case:
    id: str
    spec: dict[str, Any]
    error: str | None = None  # fragment of the apiserver's rejection; None = accepted
    expect: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case(
        "defaults",
        {},
        expect={
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            }
        },
    ),
    Case(
        "full-ok",
        {
            "amiFamily": "AL2023",
            "subnetSelectorTerms": [{"id": "subnet-0123abcd"}, {"tags": {"team": "*"}}],
            "securityGroupSelectorTerms": [{"name": "nodes"}, {"id": "sg-0123"}],
            "tags": {"team": "a"},
            "userData": "#!/bin/bash",
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "rootVolume": True,
                    "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"},
                }
            ],
            "kubelet": {
                "maxPods": 110,
                "kubeReserved": {"cpu": "100m"},
                "evictionSoft": {"memory.available": "5%"},
                "evictionSoftGracePeriod": {"memory.available": "1m"},
                "imageGCHighThresholdPercent": 85,
                "imageGCLowThresholdPercent": 80,
            },
            "instanceStorePolicy": "RAID0",
            "detailedMonitoring": True,
        },
    ),
    Case(
        "no-role-nor-profile",
        {"role": None},
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    Case(
        "role-and-profile",
        {"instanceProfile": "p"},
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    Case("empty-role", {"role": ""}, "role cannot be empty"),
    Case("no-subnet-terms", {"subnetSelectorTerms": []}, "subnetSelectorTerms"),
    Case(
        "empty-subnet-term",
        {"subnetSelectorTerms": [{}]},
        "expected at least one, got none, ['tags', 'id']",
    ),
    Case(
        "subnet-id-and-tags",
        {"subnetSelectorTerms": [{"id": "subnet-1", "tags": {"a": "b"}}]},
        "'id' is mutually exclusive",
    ),
    Case("bad-subnet-id", {"subnetSelectorTerms": [{"id": "sg-1"}]}, "subnetSelectorTerms[0].id"),
    Case(
        "empty-tag-value",
        {"subnetSelectorTerms": [{"tags": {"a": ""}}]},
        "empty tag keys or values aren't supported",
    ),
    Case(
        "sg-name-and-tags",
        {"securityGroupSelectorTerms": [{"name": "n", "tags": {"a": "b"}}]},
        "'name' is mutually exclusive",
    ),
    Case("sg-empty-term", {"securityGroupSelectorTerms": [{}]}, "['tags', 'id', 'name']"),
    Case(
        "alias-bad-family",
        {"amiSelectorTerms": [{"alias": "ubuntu@latest"}]},
        "family is not supported",
    ),
    Case("alias-bad-format", {"amiSelectorTerms": [{"alias": "al2023"}]}, "improperly formatted"),
    Case(
        "alias-windows-pinned",
        {"amiSelectorTerms": [{"alias": "windows2022@v1"}]},
        "windows families may only specify version 'latest'",
    ),
    Case(
        "alias-with-other-terms",
        {"amiSelectorTerms": [{"alias": "al2023@latest"}, {"id": "ami-123"}]},
        "cannot be set with a combination of other amiSelectorTerms",
    ),
    Case(
        "ami-id-with-tags",
        {"amiSelectorTerms": [{"id": "ami-1", "tags": {"a": "b"}}]},
        "'id' is mutually exclusive",
    ),
    Case(
        "no-alias-needs-family",
        {"amiSelectorTerms": [{"id": "ami-123"}]},
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ),
    Case(
        "custom-ami-with-family",
        {"amiSelectorTerms": [{"name": "golden-*"}], "amiFamily": "AL2023"},
    ),
    Case(
        "family-mismatch",
        {"amiFamily": "Bottlerocket"},
        "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
    ),
    Case("family-custom-with-alias", {"amiFamily": "Custom"}),
    Case(
        "restricted-tag-cluster",
        {"tags": {"kubernetes.io/cluster/demo": "owned"}},
        "tag contains a restricted tag matching kubernetes.io/cluster/",
    ),
    Case(
        "restricted-tag-nodepool",
        {"tags": {"karpenter.sh/nodepool": "x"}},
        "tag contains a restricted tag matching karpenter.sh/nodepool",
    ),
    Case(
        "restricted-tag-eks",
        {"tags": {"eks:eks-cluster-name": "x"}},
        "tag contains a restricted tag matching eks:eks-cluster-name",
    ),
    Case(
        "two-root-volumes",
        {
            "blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
            ]
        },
        "must have only one blockDeviceMappings with rootVolume",
    ),
    Case(
        "ebs-needs-size-or-snapshot",
        {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]},
        "snapshotID or volumeSize must be defined",
    ),
    Case(
        "volume-too-big",
        {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "60000Gi"}}]},
        "volumeSize",
    ),
    # spec.kubelet is an open map (upstream HEAD): the apiserver keeps whatever is written,
    # including what the controller later refuses on ValidationSucceeded
    # (tests/providers/aws/core/test_kubeletconfig.py holds those verdicts).
    Case(
        "kubelet-bad-reserved-key-kept",
        {"kubelet": {"kubeReserved": {"gpu": "1"}}},
        expect={"kubelet": {"kubeReserved": {"gpu": "1"}}},
    ),
    Case(
        "kubelet-negative-max-pods-kept",
        {"kubelet": {"maxPods": -1}},
        expect={"kubelet": {"maxPods": -1}},
    ),
    Case(
        "kubelet-image-gc-order-kept",
        {"kubelet": {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}},
        expect={"kubelet": {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}},
    ),
    Case(
        "kubelet-arbitrary-fields-kept",
        {
            "kubelet": {
                "registryBurst": 20,
                "shutdownGracePeriod": "30s",
                "featureGates": {"InPlacePodVerticalScaling": True},
                "maxPods": "min(110, vcpus * 20)",
                "kubeReserved": {"cpu": "max(60, vcpus * 30)", "memory": "1Gi"},
            }
        },
        expect={
            "kubelet": {
                "registryBurst": 20,
                "shutdownGracePeriod": "30s",
                "featureGates": {"InPlacePodVerticalScaling": True},
                "maxPods": "min(110, vcpus * 20)",
                "kubeReserved": {"cpu": "max(60, vcpus * 30)", "memory": "1Gi"},
            }
        },
    ),
    Case(
        "hop-limit-range",
        {"metadataOptions": {"httpPutResponseHopLimit": 65}},
        "httpPutResponseHopLimit",
    ),
    Case("instance-store-enum", {"instanceStorePolicy": "RAID1"}, "instanceStorePolicy"),
    Case(
        "nics-need-primary",
        {
            "networkInterfaces": [
                {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}
            ]
        },
        "must include the primary interface",
    ),
    Case(
        "placement-group-one-of",
        {"placementGroupSelector": {"name": "pg", "id": "pg-123"}},
        "exactly one of ['name', 'id'] must be set",
    ),
    Case(
        "capacity-reservation-terms",
        {
            "capacityReservationSelectorTerms": [
                {
                    "tags": {"team": "ml"},
                    "ownerID": "123456789012",
                    "instanceMatchCriteria": "open",
                },
                {"id": "cr-0123abc"},
            ]
        },
    ),
    Case(
        "capacity-reservation-id-exclusive",
        {"capacityReservationSelectorTerms": [{"id": "cr-1", "ownerID": "123456789012"}]},
        "'id' is mutually exclusive",
    ),
    Case(
        "capacity-reservation-needs-a-selector",
        {"capacityReservationSelectorTerms": [{"ownerID": "123456789012"}]},
        "expected at least one, got none",
    ),
    Case(
        "capacity-reservation-id-pattern",
        {"capacityReservationSelectorTerms": [{"id": "sg-0123"}]},
        "capacityReservationSelectorTerms[0].id",
    ),
]
