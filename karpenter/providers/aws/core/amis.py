"""AMI selection: described images → status.amis, and which AMI serves an instance type.

Per distinct requirement set one image survives: non-deprecated first, then the newest
creation date, then the greater name. ``status.amis`` is sorted newest first; an instance
type launches with the first AMI whose requirements it satisfies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from karpenter.core.model.instancetype import InstanceType
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.providers.aws.core import amifamily
from karpenter.providers.aws.core.nodeclass import AMI

_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


@dataclass(frozen=True, slots=True)
class Image:
    """What DescribeImages says about one image (times as RFC3339 strings)."""

    id: str
    name: str
    architecture: str
    creation_date: str
    deprecation_time: str = ""
    variant: str = ""  # standard | nvidia | neuron for alias AMIs; "" (arch only) otherwise


def requirements(image: Image) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """Arch plus, for alias AMIs, the variant's GPU/accelerator requirements."""
    out: list[tuple[str, str, tuple[str, ...]]] = []
    arch = _ARCH.get(image.architecture)
    if arch:
        out.append(("kubernetes.io/arch", "In", (arch,)))
    if image.variant:
        out.extend((key, op, ()) for key, op in amifamily.variant_requirements(image.variant))
    return tuple(out)


def select(images: Iterable[Image], now_rfc3339: str) -> tuple[AMI, ...]:
    """Deduplicate by requirements and order as ``status.amis`` (``now`` for deprecation)."""
    best: dict[tuple[tuple[str, str, tuple[str, ...]], ...], tuple[bool, Image]] = {}
    for image in images:
        deprecated = bool(image.deprecation_time) and image.deprecation_time <= now_rfc3339
        key = requirements(image)
        current = best.get(key)
        rank = (not deprecated, image.creation_date, image.name)
        if current is None or rank > (not current[0], current[1].creation_date, current[1].name):
            best[key] = (deprecated, image)
    chosen = sorted(
        best.items(), key=lambda kv: (kv[1][1].creation_date, kv[1][1].id), reverse=True
    )
    return tuple(AMI(img.id, img.name, dep, key) for key, (dep, img) in chosen)


def ami_requirements(ami: AMI) -> Requirements:
    """An AMI's requirements as core Requirements."""
    return Requirements(Requirement.new(k, op, vals) for k, op, vals in ami.requirements)


def for_instance_type(amis: Iterable[AMI], it: InstanceType) -> AMI | None:
    """The first AMI (status order) an instance type is compatible with."""
    for ami in amis:
        if it.requirements.compatible(ami_requirements(ami), frozenset()):
            return ami
    return None
