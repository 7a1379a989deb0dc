"""Kubelet expressions resolved per instance type, with a table evaluator standing in for CEL."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import pytest

from karpenter.core.model.quantity import MILLI
from karpenter.providers.aws.core import capacity, catalog, kubeletconfig, kubeletexpr
from karpenter.providers.aws.core.capacity import CapacityOptions, Kubelet
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.pricing import PriceTable

M5_LARGE = InstanceTypeInfo("m5.large", 2, 8192, ("x86_64",), max_enis=3, ipv4_per_eni=10)
M5_4XL = InstanceTypeInfo("m5.4xlarge", 16, 65536, ("x86_64",), max_enis=8, ipv4_per_eni=30)
SEEN: list[tuple[str, dict[str, int | str]]] = []


def table(expression: str, env: Mapping[str, int | str]) -> float:
    """A few expressions as Python, recording what each saw."""
    SEEN.append((expression, dict(env)))
    v = {k: x for k, x in env.items() if isinstance(x, int)}
    funcs: dict[str, Callable[[], float]] = {
        "min(110, vcpus * 20)": lambda: min(110, v["vcpus"] * 20),
        "max(60, vcpus * 30)": lambda: max(60, v["vcpus"] * 30),
        "11 * max_pods + 255": lambda: 11 * v["max_pods"] + 255,
        "vcpus - 4": lambda: v["vcpus"] - 4,
        "memory_mib / 1000.0": lambda: v["memory_mib"] / 1000.0,
    }
    return float(funcs[expression]())


def opts(config: dict[str, object]) -> CapacityOptions:
    return CapacityOptions(kubelet=kubeletconfig.managed(config), evaluate=table)


def test_max_pods_expression_sees_default_then_reserved_see_resolved() -> None:
    """maxPods sees the ENI-limited default; reserved expressions see the resolved max pods."""
    SEEN.clear()
    config: dict[str, object] = {
        "maxPods": "min(110, vcpus * 20)",
        "kubeReserved": {"cpu": "max(60, vcpus * 30)", "memory": "11 * max_pods + 255"},
        "systemReserved": {"memory": "1Gi"},
    }
    got = kubeletexpr.resolve(opts(config).kubelet, M5_LARGE, opts(config), table)
    assert got.max_pods == 40
    assert got.max_pods_expression == ""
    # 60m stays 60m (a multiple of 10); 11*40+255 = 695 rounds up to 704Mi (16Mi steps)
    assert got.kube_reserved == {"cpu": "60m", "memory": "704Mi"}
    assert got.system_reserved == {"memory": "1Gi"}
    assert SEEN[0][1] == {
        "instance_type": "m5.large",
        "vcpus": 2,
        "memory_mib": 8192,
        "default_enis": 3,
        "ips_per_eni": 10,
        "max_pods": 29,
    }
    assert SEEN[-1][1]["max_pods"] == 40


def test_capacity_follows_the_resolved_values() -> None:
    """The catalogue's pods capacity and kube-reserved use each type's own resolved values."""
    inp = catalog.CatalogInput(
        region="us-east-1",
        zones={"m5.large": ("us-east-1a",), "m5.4xlarge": ("us-east-1a",)},
        prices=PriceTable("us-east-1", {"m5.large": 0.096, "m5.4xlarge": 0.768}),
        capacity=opts({"maxPods": "min(110, vcpus * 20)", "kubeReserved": {"cpu": "vcpus - 4"}}),
    )
    small = catalog.instance_type(M5_LARGE, inp)
    big = catalog.instance_type(M5_4XL, inp)
    assert small is None  # 2 - 4 < 0: no capacity can be promised for it
    assert big is not None
    assert big.capacity["pods"] == 110 * MILLI
    assert big.overhead["cpu"] == 20  # "12" read as millicores, rounded up to 20m


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param(
            {"kubeReserved": {"cpu": "vcpus - 4"}},
            "kubeReserved.cpu gave a negative value (-2) for m5.large",
            id="negative",
        ),
    ],
)
def test_evaluation_failures(config: dict[str, object], message: str) -> None:
    """A negative or non-finite result fails for that instance type only."""
    o = opts(config)
    with pytest.raises(kubeletexpr.ExpressionError, match=re.escape(message)):
        kubeletexpr.resolve(o.kubelet, M5_LARGE, o, table)
    assert kubeletexpr.resolve(o.kubelet, M5_4XL, o, table).kube_reserved == {"cpu": "20m"}


def test_double_results_are_truncated_then_rounded() -> None:
    """memory_mib / 1000.0 on m5.large = 8.192 → 8 → 16Mi."""
    o = opts({"systemReserved": {"memory": "memory_mib / 1000.0"}})
    assert kubeletexpr.resolve(o.kubelet, M5_LARGE, o, table).system_reserved == {"memory": "16Mi"}


def test_check_reasons() -> None:
    """Gate off, compile failure and per-type failure each have their own reason."""
    config: dict[str, object] = {"kubeReserved": {"cpu": "vcpus - 4"}}
    types = (M5_4XL, M5_LARGE)
    o = opts(config)
    assert kubeletexpr.check({"maxPods": 10}, False, lambda e: "", types, o) is None
    disabled = kubeletexpr.check(config, False, lambda e: "", types, o)
    assert disabled == (
        "KubeletExpressionsDisabled",
        "spec.kubelet has CEL expressions (kubeReserved.cpu) but the NodeClassCEL feature gate "
        "is disabled",
    )
    invalid = kubeletexpr.check(config, True, lambda e: "does not parse", types, o)
    assert invalid == (
        "KubeletExpressionInvalid",
        "spec.kubelet.kubeReserved.cpu: does not parse",
    )
    failed = kubeletexpr.check(config, True, lambda e: "", types, o)
    assert failed == (
        "KubeletExpressionEvaluationFailed",
        "spec.kubelet: kubeReserved.cpu gave a negative value (-2) for m5.large",
    )
    assert kubeletexpr.check(config, True, lambda e: "", (M5_4XL,), o) is None


def test_without_evaluator_expressions_read_as_unset() -> None:
    """Gate off: the catalogue keeps Karpenter's defaults (the class is not Ready anyway)."""
    o = CapacityOptions(kubelet=Kubelet(max_pods_expression="min(110, vcpus * 20)"))
    assert kubeletexpr.for_type(o, M5_LARGE) is o
    assert capacity.pods(M5_LARGE, o) == 29
