"""AWS settings: upstream's environment names, defaults and validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from karpenter.providers.aws.settings import AWSSettings
from karpenter.settings import describe_error


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no environment the AWS settings are upstream's defaults."""
    for name in AWSSettings.model_fields:
        monkeypatch.delenv(name, raising=False)
    s = AWSSettings()
    assert s.VM_MEMORY_OVERHEAD_PERCENT == 0.075
    assert (s.RESERVED_ENIS, s.INTERRUPTION_QUEUE, s.CLUSTER_ENDPOINT) == (0, "", "")
    assert (s.ISOLATED_VPC, s.EKS_CONTROL_PLANE, s.DISABLE_DRY_RUN, s.ENABLE_ZONAL_SHIFT) == (
        False,
        False,
        False,
        False,
    )
    assert (s.AMI_REFRESH_INTERVAL, s.SUBNET_REFRESH_INTERVAL) == ("1m", "1m")


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values come from upstream's variable names."""
    monkeypatch.setenv("CLUSTER_NAME", "demo")
    monkeypatch.setenv("CLUSTER_ENDPOINT", "https://ABC.gr7.us-east-1.eks.amazonaws.com")
    monkeypatch.setenv("ISOLATED_VPC", "true")
    monkeypatch.setenv("VM_MEMORY_OVERHEAD_PERCENT", "0.06")
    monkeypatch.setenv("RESERVED_ENIS", "1")
    monkeypatch.setenv("INTERRUPTION_QUEUE", "demo")
    s = AWSSettings()
    assert (s.CLUSTER_NAME, s.ISOLATED_VPC, s.VM_MEMORY_OVERHEAD_PERCENT) == ("demo", True, 0.06)
    assert (s.RESERVED_ENIS, s.INTERRUPTION_QUEUE) == (1, "demo")


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        pytest.param(
            "VM_MEMORY_OVERHEAD_PERCENT", "-0.1", "greater than or equal to 0", id="overhead"
        ),
        pytest.param("RESERVED_ENIS", "-1", "greater than or equal to 0", id="enis"),
        pytest.param("CLUSTER_ENDPOINT", "not-a-url", "absolute URL", id="endpoint"),
        pytest.param("AMI_REFRESH_INTERVAL", "30s", "below the 1m minimum", id="ami-interval"),
        pytest.param("ISOLATED_VPC", "yes", "invalid boolean", id="bool"),
    ],
)
def test_invalid(monkeypatch: pytest.MonkeyPatch, name: str, value: str, fragment: str) -> None:
    """A bad value fails with the variable named."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as info:
        AWSSettings()
    message = describe_error(info.value)
    assert message.startswith(name) and fragment in message


@pytest.mark.parametrize(
    ("value", "cel"),
    [
        pytest.param("", False, id="empty"),
        pytest.param("NodeClassCEL=false", False, id="default"),
        pytest.param("NodeClassCEL=true", True, id="on"),
    ],
)
def test_aws_feature_gates(monkeypatch: pytest.MonkeyPatch, value: str, cel: bool) -> None:
    """AWS_FEATURE_GATES holds the AWS-only gates; NodeClassCEL is off by default."""
    monkeypatch.setenv("AWS_FEATURE_GATES", value)
    assert AWSSettings().aws_feature_gates == {"NodeClassCEL": cel}


def test_aws_feature_gates_refuse_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """A core gate or a typo in AWS_FEATURE_GATES is refused at startup."""
    monkeypatch.setenv("AWS_FEATURE_GATES", "NodeOverlay=true")
    with pytest.raises(ValidationError, match="unrecognized AWS feature gate 'NodeOverlay'"):
        AWSSettings()
