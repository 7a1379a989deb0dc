"""The EC2NodeClass decode hook: a whole apiserver object → the core value, one error type.

The same error contract as ``api.decode`` (one ``CodecError`` naming the field), so the
provider's informer-fed store treats EC2NodeClasses like any kind the mirror decodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpenter.api import decode as api_decode
from karpenter.providers.aws.api import ec2nodeclass
from karpenter.providers.aws.core.nodeclass import EC2NodeClass


def ec2_node_class(obj: Mapping[str, Any]) -> EC2NodeClass:
    """A karpenter.k8s.aws/v1 EC2NodeClass, its status included."""
    return api_decode.wrap(ec2nodeclass.from_manifest, obj)
