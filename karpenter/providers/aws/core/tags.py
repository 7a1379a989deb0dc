"""Tags Karpenter puts on everything it creates, and launch-template naming.

Base tags are ``spec.tags`` overridden by the cluster-ownership, NodePool, NodeClass and EKS
cluster-name tags; tags that would let a user impersonate Karpenter are refused. Launch
templates are named ``karpenter.k8s.aws/<hash of their content>`` so equal content shares
one template and changed content gets a new one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

NODEPOOL = "karpenter.sh/nodepool"
NODECLAIM = "karpenter.sh/nodeclaim"
NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
EKS_CLUSTER_NAME = "eks:eks-cluster-name"
NAME = "Name"
LAUNCH_TEMPLATE_PREFIX = "karpenter.k8s.aws/"
_RESTRICTED = (
    re.compile(r"^kubernetes\.io/cluster/.*$"),
    re.compile(r"^karpenter\.sh/nodepool$"),
    re.compile(r"^karpenter\.sh/nodeclaim$"),
    re.compile(r"^karpenter\.k8s\.aws/ec2nodeclass$"),
    re.compile(r"^eks:eks-cluster-name$"),
)


class TagError(ValueError):
    """spec.tags names a tag Karpenter owns."""


def cluster_tag(cluster_name: str) -> str:
    """``kubernetes.io/cluster/<name>``."""
    return f"kubernetes.io/cluster/{cluster_name}"


def validate(tags: Mapping[str, str]) -> None:
    """Raise TagError for a restricted key (message as upstream's CEL rule)."""
    for key in sorted(tags):
        if not key:
            raise TagError("empty tag keys aren't supported")
        for pattern in _RESTRICTED:
            if pattern.match(key):
                raise TagError(f"tag contains a restricted tag matching {key}")


def instance_tags(
    spec_tags: Mapping[str, str], cluster_name: str, nodepool: str, nodeclass: str
) -> dict[str, str]:
    """Tags for instances, volumes, fleets and launch templates."""
    tags = dict(spec_tags)
    tags.update(
        {
            cluster_tag(cluster_name): "owned",
            NODEPOOL: nodepool,
            EKS_CLUSTER_NAME: cluster_name,
            NODECLASS: nodeclass,
        }
    )
    return dict(sorted(tags.items()))


def launch_template_name(content: Mapping[str, object]) -> str:
    """``karpenter.k8s.aws/<uint64>`` from the template's content (order-insensitive)."""
    canonical = json.dumps(content, sort_keys=True, default=str)
    digest = hashlib.sha256(canonical.encode()).digest()
    return f"{LAUNCH_TEMPLATE_PREFIX}{int.from_bytes(digest[:8], 'big')}"


def provider_id(zone: str, instance_id: str) -> str:
    """``aws:///<zone>/<instance-id>``."""
    return f"aws:///{zone}/{instance_id}"


def instance_id(provider_id: str) -> str:
    """The instance id at the end of a provider id (``""`` when it is not an AWS one)."""
    match = re.match(r"^(.*):///(.*)/(.*)$", provider_id)
    return match[3] if match and match[1] == "aws" else ""
