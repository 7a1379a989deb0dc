"""Kubelet expressions: ``maxPods`` and reserved values resolved for one instance type.

Behind the NodeClassCEL gate, ``spec.kubelet.maxPods`` may be a CEL expression and a
kubeReserved/systemReserved value that is not a quantity is one too. Karpenter evaluates them
itself, per instance type, so its capacity math and the node's kubelet agree; nothing
expression-shaped reaches user data. The CEL engine is injected (``Evaluator``): the core
only names the variables, orders the evaluation and turns numbers into quantities.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from karpenter.providers.aws.core import capacity, kubeletconfig
from karpenter.providers.aws.core.capacity import CapacityOptions, Kubelet
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo

DISABLED = "KubeletExpressionsDisabled"
INVALID = "KubeletExpressionInvalid"
EVALUATION_FAILED = "KubeletExpressionEvaluationFailed"
VARIABLES = ("instance_type", "vcpus", "memory_mib", "default_enis", "ips_per_eni", "max_pods")
_INT32_MAX = 2**31 - 1
# per key: the unit a bare result is read in, and the step it is rounded up to
_UNITS = {"cpu": ("m", 10), "memory": ("Mi", 16), "ephemeral-storage": ("Gi", 1), "pid": ("", 1)}

Variables = Mapping[str, int | str]
# evaluate(expression, variables) -> number; raises ExpressionError
Evaluator = Callable[[str, Variables], float]


class ExpressionError(ValueError):
    """An expression could not be compiled, or gave no usable value for an instance type."""


def variables(info: InstanceTypeInfo, max_pods: int) -> dict[str, int | str]:
    """The variables an expression sees for ``info`` (upstream's names)."""
    return {
        "instance_type": info.name,
        "vcpus": info.vcpus,
        "memory_mib": info.memory_mib,
        "default_enis": info.max_enis,
        "ips_per_eni": info.ipv4_per_eni,
        "max_pods": max_pods,
    }


def has_expressions(kubelet: Kubelet) -> bool:
    """True when ``kubelet`` still holds an expression to resolve."""
    return bool(kubelet.max_pods_expression) or any(
        not kubeletconfig.is_quantity(v)
        for v in (*kubelet.kube_reserved.values(), *kubelet.system_reserved.values())
    )


def _number(value: float, what: str, info: InstanceTypeInfo) -> int:
    if not math.isfinite(value):
        raise ExpressionError(f"{what} gave {value} for {info.name}")
    if value < 0:
        raise ExpressionError(f"{what} gave a negative value ({value:g}) for {info.name}")
    return int(value)  # a double result is truncated, as upstream does


def _quantity(key: str, number: int) -> str:
    unit, step = _UNITS.get(key, ("", 1))
    # rounding up: never reserve less than asked, and nearby results share a launch template
    return f"{-(-number // step) * step}{unit}"


def _reserved(
    values: Mapping[str, str], field: str, info: InstanceTypeInfo, env: Variables, ev: Evaluator
) -> dict[str, str]:
    out = {}
    for key, text in sorted(values.items()):
        if kubeletconfig.is_quantity(text):
            out[key] = text
        else:
            out[key] = _quantity(key, _number(ev(text, env), f"{field}.{key}", info))
    return out


def resolve(
    kubelet: Kubelet, info: InstanceTypeInfo, opts: CapacityOptions, evaluate: Evaluator
) -> Kubelet:
    """``kubelet`` with every expression replaced by its value for ``info``.

    The maxPods expression sees ``max_pods`` = Karpenter's default for the type (ENI-limited
    or 110, capped by podsPerCore); reserved expressions see the resolved max pods.
    """
    if not has_expressions(kubelet):
        return kubelet
    resolved = replace(kubelet, max_pods_expression="")
    if kubelet.max_pods_expression:
        default = capacity.pods(info, replace(opts, kubelet=replace(resolved, max_pods=None)))
        value = _number(
            evaluate(kubelet.max_pods_expression, variables(info, default)), "maxPods", info
        )
        if value > _INT32_MAX:
            raise ExpressionError(f"maxPods gave {value} for {info.name}, beyond int32")
        resolved = replace(resolved, max_pods=value)
    env = variables(info, capacity.pods(info, replace(opts, kubelet=resolved)))
    return replace(
        resolved,
        kube_reserved=_reserved(kubelet.kube_reserved, "kubeReserved", info, env, evaluate),
        system_reserved=_reserved(kubelet.system_reserved, "systemReserved", info, env, evaluate),
    )


def for_type(opts: CapacityOptions, info: InstanceTypeInfo) -> CapacityOptions:
    """``opts`` with the kubelet resolved for ``info`` (unchanged without expressions).

    Without an evaluator (the gate is off) expressions stay unresolved and read as unset:
    the NodeClass is not Ready then (``KubeletExpressionsDisabled``), so nothing launches.
    """
    if opts.evaluate is None or not has_expressions(opts.kubelet):
        return opts
    return replace(opts, kubelet=resolve(opts.kubelet, info, opts, opts.evaluate))


def check(
    config: Mapping[str, object],
    enabled: bool,
    compile_error: Callable[[str], str],
    infos: tuple[InstanceTypeInfo, ...],
    opts: CapacityOptions,
) -> tuple[str, str] | None:
    """``(reason, message)`` when the expressions in ``config`` cannot be used, else None.

    Gate off → disabled; then each expression must compile; then every known instance type
    must evaluate (a compile check cannot see a division by zero on one small type).
    """
    found = kubeletconfig.expressions(config)
    if not found:
        return None
    if not enabled:
        paths = ", ".join(path for path, _ in found)
        return DISABLED, (
            f"spec.kubelet has CEL expressions ({paths}) but the NodeClassCEL feature gate "
            "is disabled"
        )
    problems = [f"spec.kubelet.{p}: {e}" for p, text in found if (e := compile_error(text))]
    if problems:
        return INVALID, "; ".join(problems)
    if opts.evaluate is None:
        return None
    for info in sorted(infos, key=lambda i: i.name):
        try:
            resolve(opts.kubelet, info, opts, opts.evaluate)
        except ExpressionError as err:
            return EVALUATION_FAILED, f"spec.kubelet: {err}"
    return None
