"""``spec.kubelet`` as an open map: its rules, the subset Karpenter manages, family support.

The CRD preserves the map as written, so everything is checked here and reported on the
NodeClass's ``ValidationSucceeded`` condition, never at admission: a strict decode against
the kubelet's own type (``kubeletschema``), then the rules Karpenter adds (eviction signals,
reserved keys, thresholds). Karpenter reads a managed subset into ``capacity.Kubelet`` for its
capacity math and user data; any other field reaches the node only through nodeadm's
``kubelet.config`` (AL2023) or the user's own user data (Custom), so other families refuse
it rather than drop it silently. ``maxPods`` and reserved values may be CEL expressions
(``kubeletexpr`` evaluates them); here they are only recognised.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from karpenter.core.model.duration import parse_go_duration
from karpenter.core.model.quantity import QuantityError, parse_quantity
from karpenter.providers.aws.core import amifamily, kubeletschema
from karpenter.providers.aws.core.capacity import Kubelet

INVALID = "InvalidKubeletConfiguration"
UNSUPPORTED = "UnsupportedKubeletConfiguration"
PREFIX = "spec.kubelet: "
SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
RESERVED_KEYS = ("cpu", "memory", "ephemeral-storage", "pid")
RESERVED_FIELDS = ("kubeReserved", "systemReserved")
MANAGED = frozenset(
    {
        "clusterDNS",
        "maxPods",
        "podsPerCore",
        "systemReserved",
        "kubeReserved",
        "evictionHard",
        "evictionSoft",
        "evictionSoftGracePeriod",
        "evictionMaxPodGracePeriod",
        "imageGCHighThresholdPercent",
        "imageGCLowThresholdPercent",
        "cpuCFSQuota",
    }
)
_PERCENT = re.compile(r"^(\d+(\.\d+)?)%$")


def is_quantity(text: str) -> bool:
    """True when ``text`` parses as a resource quantity (else it is an expression)."""
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def expressions(config: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(field path, expression)`` for every value that is a CEL expression, sorted.

    A string ``maxPods`` is one; a reserved value is one when it is not a quantity.
    """
    found = []
    if isinstance(config.get("maxPods"), str):
        found.append(("maxPods", str(config["maxPods"])))
    for name in RESERVED_FIELDS:
        values = config.get(name)
        if isinstance(values, dict):
            found.extend(
                (f"{name}.{k}", v)
                for k, v in sorted(values.items())
                if isinstance(v, str) and not is_quantity(v)
            )
    return found


def _threshold_problems(name: str, values: Mapping[str, object]) -> list[str]:
    problems = []
    for key, value in sorted(values.items()):
        text = str(value)
        percent = _PERCENT.match(text)
        if percent:
            ok = 0 <= float(percent[1]) <= 100
        else:
            ok = is_quantity(text) and parse_quantity(text) >= 0
        if not ok:
            problems.append(
                f"{name}[{key}] {text!r} is not a percentage (0-100%) or a non-negative quantity"
            )
    return problems


def _grace_problems(values: Mapping[str, object]) -> list[str]:
    problems = []
    for key, value in sorted(values.items()):
        try:
            ok = parse_go_duration(str(value)) >= 0
        except ValueError:
            ok = False
        if not ok:
            problems.append(
                f"evictionSoftGracePeriod[{key}] {value!r} is not a non-negative duration"
            )
    return problems


def _eviction_problems(config: Mapping[str, object]) -> list[str]:
    problems = []
    maps = {}
    for name in (
        "evictionHard",
        "evictionSoft",
        "evictionSoftGracePeriod",
        "evictionMinimumReclaim",
    ):
        values = config.get(name)
        if not isinstance(values, dict):
            continue
        maps[name] = values
        if set(values) - set(SIGNALS):
            problems.append(f"valid keys for {name} are {list(SIGNALS)}")
        if name == "evictionSoftGracePeriod":
            problems.extend(_grace_problems(values))
        else:
            problems.extend(_threshold_problems(name, values))
    soft, grace = maps.get("evictionSoft", {}), maps.get("evictionSoftGracePeriod", {})
    if set(soft) != set(grace):
        problems.append("evictionSoft and evictionSoftGracePeriod must name the same signals")
    return problems


def _reserved_problems(config: Mapping[str, object]) -> list[str]:
    problems = []
    for name in RESERVED_FIELDS:
        values = config.get(name)
        if not isinstance(values, dict):
            continue
        if set(values) - set(RESERVED_KEYS):
            problems.append(f"valid keys for {name} are {list(RESERVED_KEYS)}")
        if any(str(v).startswith("-") for v in values.values()):
            problems.append(f"{name} value cannot be a negative resource quantity")
    return problems


def _number_problems(config: Mapping[str, object]) -> list[str]:
    problems = []
    for name in ("podsPerCore", "evictionMaxPodGracePeriod", "maxPods"):
        value = config.get(name)
        if isinstance(value, int) and value < 0:
            problems.append(f"{name} must be greater than or equal to 0")
    high, low = config.get("imageGCHighThresholdPercent"), config.get("imageGCLowThresholdPercent")
    for name, value in (("imageGCHighThresholdPercent", high), ("imageGCLowThresholdPercent", low)):
        if isinstance(value, int) and not 0 <= value <= 100:
            problems.append(f"{name} must be between 0 and 100")
    if isinstance(high, int) and isinstance(low, int) and high <= low:
        problems.append(
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"
        )
    return problems


def validate(config: Mapping[str, object]) -> str:
    """The ``InvalidKubeletConfiguration`` message (``""``: valid), problems joined by "; "."""
    if not config:
        return ""
    # A maxPods expression is a string where the kubelet's type has an int32: decode the
    # shape with a placeholder so it does not hide every other problem (upstream does too).
    shape = dict(config)
    if isinstance(shape.get("maxPods"), str):
        shape["maxPods"] = 0
    problems = kubeletschema.decode(shape)
    if not problems:
        if "registerWithTaints" in config:
            problems.append("registerWithTaints may not be set: Karpenter registers the taints")
        problems += _eviction_problems(config)
        problems += _reserved_problems(config)
        problems += _number_problems(config)
    return "; ".join(PREFIX + p for p in problems)


def unsupported(config: Mapping[str, object], family: str) -> str:
    """The ``UnsupportedKubeletConfiguration`` message for ``family`` (``""``: supported)."""
    if family in (amifamily.AL2023, amifamily.CUSTOM):
        return ""
    extra = sorted(set(config) - MANAGED)
    if family == amifamily.BOTTLEROCKET and "podsPerCore" in config:
        extra = sorted({*extra, "podsPerCore"})
    if extra:
        return (
            f"spec.kubelet has fields not applied by the {family} AMI family that would be "
            f"silently dropped: {', '.join(extra)}"
        )
    dns = config.get("clusterDNS")
    if isinstance(dns, list) and len(dns) > 1:
        return (
            f"spec.kubelet.clusterDNS has {len(dns)} entries; the {family} AMI family applies "
            "only one"
        )
    return ""


def _str_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value)


def managed(config: Mapping[str, object]) -> Kubelet:
    """The subset Karpenter applies itself (anything malformed reads as unset: ``validate``
    reports it and keeps the class from launching)."""
    max_pods = config.get("maxPods")
    dns = config.get("clusterDNS")
    return Kubelet(
        _int(max_pods),
        _int(config.get("podsPerCore")),
        _str_map(config.get("kubeReserved")),
        _str_map(config.get("systemReserved")),
        _str_map(config.get("evictionHard")),
        tuple(str(d) for d in dns) if isinstance(dns, list) else (),
        max_pods_expression=max_pods if isinstance(max_pods, str) else "",
    )
