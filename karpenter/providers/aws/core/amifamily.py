"""AMI families: what each family changes (pods, overhead, devices) and its SSM alias paths.

Families are upstream's: AL2, AL2023, Bottlerocket, Windows2019/2022/2025 and Custom. An
alias (``al2023@latest``, ``bottlerocket@v1.20.0``) names a family and a version; the SSM
public parameters behind it carry the AMI ids, one per architecture and variant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

AL2 = "AL2"
AL2023 = "AL2023"
BOTTLEROCKET = "Bottlerocket"
CUSTOM = "Custom"
WINDOWS2019 = "Windows2019"
WINDOWS2022 = "Windows2022"
WINDOWS2025 = "Windows2025"
FAMILIES = (AL2, AL2023, BOTTLEROCKET, CUSTOM, WINDOWS2019, WINDOWS2022, WINDOWS2025)
WINDOWS = (WINDOWS2019, WINDOWS2022, WINDOWS2025)
_ALIAS_FAMILIES = {
    "al2": AL2,
    "al2023": AL2023,
    "bottlerocket": BOTTLEROCKET,
    "windows2019": WINDOWS2019,
    "windows2022": WINDOWS2022,
    "windows2025": WINDOWS2025,
}
_ALIAS = re.compile(r"^([a-zA-Z0-9]+)@(.+)$")
_WINDOWS_BUILD = {WINDOWS2019: "10.0.17763", WINDOWS2022: "10.0.20348", WINDOWS2025: "10.0.26100"}

GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"


@dataclass(frozen=True, slots=True)
class Features:
    """Per-family switches of the capacity math (upstream's FeatureFlags)."""

    eni_limited_memory_overhead: bool = True
    pods_per_core: bool = True
    eni_limited_pods: bool = True
    ephemeral_device: str = "/dev/xvda"
    default_volume_gib: int = 20


def features(family: str) -> Features:
    """The switches of ``family`` (AL2, AL2023 and Custom share upstream's defaults)."""
    if family == BOTTLEROCKET:
        return Features(False, False, True, "/dev/xvdb", 20)
    if family in WINDOWS:
        return Features(False, True, False, "/dev/sda1", 50)
    return Features()


def windows_build(family: str) -> str:
    """``node.kubernetes.io/windows-build`` of a Windows family, else ``""``."""
    return _WINDOWS_BUILD.get(family, "")


class AliasError(ValueError):
    """An ``amiSelectorTerms[].alias`` is malformed or names an unknown family."""


@dataclass(frozen=True, slots=True)
class Alias:
    """A parsed alias: the family and the version (``latest`` or a pinned one)."""

    family: str
    version: str


def parse_alias(text: str) -> Alias:
    """``al2023@latest`` → Alias(AL2023, latest); raises AliasError."""
    match = _ALIAS.match(text)
    if match is None or match[1].lower() not in _ALIAS_FAMILIES:
        raise AliasError(f"invalid alias {text!r} (family@version, family one of al2, al2023, ...)")
    family = _ALIAS_FAMILIES[match[1].lower()]
    if family in WINDOWS and match[2] != "latest":
        raise AliasError(f"{family} aliases only support @latest")
    return Alias(family, match[2])


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One SSM parameter an alias resolves through, with the requirements its AMI gets."""

    path: str
    variant: str  # standard | nvidia | neuron


def alias_parameters(alias: Alias, k8s_version: str) -> tuple[AliasParameter, ...]:
    """The SSM public parameter paths of an alias for a Kubernetes minor version."""
    v = k8s_version
    ver = alias.version
    if alias.family == AL2023:
        pick = "recommended" if ver == "latest" else None
        out = []
        for arch, variants in (
            ("x86_64", ("standard", "nvidia", "neuron")),
            ("arm64", ("standard", "nvidia")),
        ):
            for variant in variants:
                leaf = pick or f"amazon-eks-node-al2023-{arch}-{variant}-{v}-{ver}"
                out.append(
                    AliasParameter(
                        f"/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/{arch}/{variant}/{leaf}/image_id",
                        variant,
                    )
                )
        return tuple(out)
    if alias.family == AL2:
        base = f"/aws/service/eks/optimized-ami/{v}"
        out = []
        for path, prefix, variant in (
            ("amazon-linux-2", "amazon-eks-node", "standard"),
            ("amazon-linux-2-arm64", "amazon-eks-arm64-node", "standard"),
            ("amazon-linux-2-gpu", "amazon-eks-gpu-node", "nvidia"),
        ):
            leaf = "recommended" if ver == "latest" else f"{prefix}-{v}-{ver}"
            out.append(AliasParameter(f"{base}/{path}/{leaf}/image_id", variant))
        return tuple(out)
    if alias.family == BOTTLEROCKET:
        bver = ver if ver == "latest" else ver.removeprefix("v")
        base = f"/aws/service/bottlerocket/aws-k8s-{v}"
        return (
            AliasParameter(f"{base}/x86_64/{bver}/image_id", "standard"),
            AliasParameter(f"{base}/arm64/{bver}/image_id", "standard"),
            AliasParameter(f"{base}-nvidia/x86_64/{bver}/image_id", "nvidia"),
            AliasParameter(f"{base}-nvidia/arm64/{bver}/image_id", "nvidia"),
        )
    year = alias.family.removeprefix("Windows")
    return (
        AliasParameter(
            f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{v}/image_id",
            "standard",
        ),
    )


def variant_requirements(variant: str) -> tuple[tuple[str, str], ...]:
    """(key, operator) pairs an AMI variant adds: standard excludes GPUs and accelerators."""
    if variant == "nvidia":
        return ((GPU_COUNT, "Exists"),)
    if variant == "neuron":
        return ((ACCELERATOR_COUNT, "Exists"),)
    return ((GPU_COUNT, "DoesNotExist"), (ACCELERATOR_COUNT, "DoesNotExist"))


def _minor(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    try:
        return int(major), int(minor.rstrip("+"))
    except ValueError:
        return (0, 0)


def unsupported_alias(alias: Alias, k8s_version: str) -> str:
    """Why an alias cannot be used on this Kubernetes version (``""``: it can)."""
    version = _minor(k8s_version)
    if alias.family == AL2 and version >= (1, 33):
        return (
            "AL2 aliases are no longer supported on EKS 1.33+ (AL2 AMIs are not published for "
            "1.33 and later)"
        )
    if alias.family == WINDOWS2025 and version < (1, 35):
        return (
            "Windows Server 2025 requires EKS version 1.35 or higher, current version: "
            f"{k8s_version}"
        )
    return ""
