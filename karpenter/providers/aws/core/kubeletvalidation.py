"""``spec.kubelet``'s verdict on the NodeClass's ``ValidationSucceeded`` condition.

The checks run from the cheapest and most basic to the costliest, and the first failure is the
verdict: the map must decode as a kubelet configuration and follow Karpenter's rules
(``InvalidKubeletConfiguration``), the AMI family must be able to apply every field
(``UnsupportedKubeletConfiguration``), then any CEL expression must be allowed by the
NodeClassCEL gate, compile, and evaluate for every known instance type (``kubeletexpr``).
"""

from __future__ import annotations

from collections.abc import Callable

from karpenter.providers.aws.core import kubeletconfig, kubeletexpr
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core.capacity import CapacityOptions
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo


def verdict(
    node_class: nc.EC2NodeClass,
    cel_enabled: bool,
    compile_error: Callable[[str], str],
    infos: tuple[InstanceTypeInfo, ...],
    opts: CapacityOptions,
) -> tuple[str, str] | None:
    """``(reason, message)`` of the first kubelet problem, or None when the kubelet is usable.

    ``opts`` are the class's capacity options (with the evaluator when the gate is on).
    """
    config = node_class.spec.kubelet_raw
    if not config:
        return None
    message = kubeletconfig.validate(config)
    if message:
        return kubeletconfig.INVALID, message
    message = kubeletconfig.unsupported(config, node_class.resolved_family())
    if message:
        return kubeletconfig.UNSUPPORTED, message
    return kubeletexpr.check(config, cel_enabled, compile_error, infos, opts)
