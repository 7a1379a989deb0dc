"""The cel-python engine behind kubelet expressions: compile checks and per-type evaluation."""

from __future__ import annotations

import pytest

from karpenter.providers.aws.api.kubeletcel import Engine
from karpenter.providers.aws.core import kubeletconfig, kubeletexpr
from karpenter.providers.aws.core.capacity import CapacityOptions
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo

M5_4XL = InstanceTypeInfo("m5.4xlarge", 16, 65536, ("x86_64",), max_enis=8, ipv4_per_eni=30)
ENV = kubeletexpr.variables(M5_4XL, 58)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        pytest.param("((default_enis - 1) * (ips_per_eni - 1)) + 2", 205, id="eni-formula"),
        pytest.param("min(110, vcpus * 20)", 110, id="min"),
        pytest.param("max(60, vcpus * 30)", 480, id="max"),
        pytest.param("max(100.0, double(memory_mib) / 64.0)", 1024.0, id="double"),
        pytest.param("11 * max_pods + 255", 893, id="max-pods"),
        pytest.param("instance_type.startsWith('m5') ? 1 : 2", 1, id="instance-type"),
    ],
)
def test_evaluate(expression: str, value: float) -> None:
    """Upstream's variables and the max/min functions evaluate against one instance type."""
    engine = Engine()
    assert engine.compile_error(expression) == ""
    assert engine.evaluate(expression, ENV) == value


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        pytest.param("min(110,", "does not parse", id="syntax"),
        pytest.param("cores * 2", "undeclared reference to 'cores'", id="unknown-variable"),
        pytest.param("vcpus * 2.5", "wrong argument types", id="int-times-double"),
        pytest.param("max(1, 2.0)", "wrong argument types", id="mixed-max"),
        pytest.param("vcpus > 2", "must return an int or a double", id="bool-result"),
    ],
)
def test_compile_errors(expression: str, fragment: str) -> None:
    """What cel-go's checker would refuse is refused before any instance type is tried."""
    assert fragment in Engine().compile_error(expression)


def test_runtime_failures_are_evaluation_failures() -> None:
    """A division by zero compiles, then fails for the type (KubeletExpressionEvaluationFailed)."""
    engine = Engine()
    expression = "1048576 / (vcpus - vcpus)"
    assert engine.compile_error(expression) == ""
    config: dict[str, object] = {"maxPods": expression}
    opts = CapacityOptions(kubelet=kubeletconfig.managed(config), evaluate=engine.evaluate)
    got = kubeletexpr.check(config, True, engine.compile_error, (M5_4XL,), opts)
    assert got is not None
    assert got[0] == "KubeletExpressionEvaluationFailed"
    assert "divide by zero" in got[1]
    overflow = {"maxPods": "vcpus * 1000000000"}
    opts = CapacityOptions(kubelet=kubeletconfig.managed(overflow), evaluate=engine.evaluate)
    got = kubeletexpr.check(overflow, True, engine.compile_error, (M5_4XL,), opts)
    assert got == (
        "KubeletExpressionEvaluationFailed",
        "spec.kubelet: maxPods gave 16000000000 for m5.4xlarge, beyond int32",
    )


def test_results_and_failures_are_remembered() -> None:
    """A second evaluation with the same variables answers from the memo, failures included."""
    engine = Engine()
    assert engine.evaluate("vcpus * 2", ENV) == 32
    with pytest.raises(kubeletexpr.ExpressionError, match="divide by zero"):
        engine.evaluate("1 / (vcpus - vcpus)", ENV)
    engine._programs.clear()  # a memo hit never needs the program again
    assert engine.evaluate("vcpus * 2", ENV) == 32
    with pytest.raises(kubeletexpr.ExpressionError, match="divide by zero"):
        engine.evaluate("1 / (vcpus - vcpus)", ENV)
    assert len(engine._programs) == 0
