"""The EC2NodeClass kind at the apiserver boundary: where it is served and how an object decodes.

``RESOURCE`` is what the kube client lists, watches and patches; ``decode`` turns a whole
apiserver object into the core value with the same error contract as ``api.decode`` (one
``CodecError`` naming the field), so the provider's informer-fed store treats it like any kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpenter.api import decode as api_decode
from karpenter.kube.client import Resource
from karpenter.providers.aws.api import ec2nodeclass
from karpenter.providers.aws.core.nodeclass import EC2NodeClass

RESOURCE = Resource("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass")


def decode(obj: Mapping[str, Any]) -> EC2NodeClass:
    """A karpenter.k8s.aws/v1 EC2NodeClass, its status included."""
    return api_decode.wrap(ec2nodeclass.from_manifest, obj)
