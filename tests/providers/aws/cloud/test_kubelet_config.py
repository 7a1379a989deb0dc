"""spec.kubelet end to end on moto: ValidationSucceeded verdicts, CEL capacity, AL2023 user data."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest

from karpenter.providers.aws.cloud import factory
from karpenter.providers.aws.cloud.provider import AWSCloudProvider
from karpenter.providers.aws.core import kubeletconfig
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.fixtures import NOW, Env, claim, env, prices

__all__ = ["env", "prices"]  # fixtures used by name
SAME_SIZE = ("m5.large", "c5.large")  # 2 vCPUs each


def with_kubelet(cls: nc.EC2NodeClass, raw: dict[str, object]) -> nc.EC2NodeClass:
    spec = replace(cls.spec, kubelet=kubeletconfig.managed(raw), kubelet_raw=raw)
    return replace(cls, spec=spec)


def provider(env: Env, gates: str) -> AWSCloudProvider:
    old = env.provider
    settings = old.settings.model_copy(update={"AWS_FEATURE_GATES": gates})
    return AWSCloudProvider(
        env.clients, settings, env.classes, old.region, old.prices, env.clock, "10.100.0.10"
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("gates", "family", "raw", "reason"),
    [
        pytest.param(
            "NodeClassCEL=false",
            "",
            {"registryBurstt": 20},
            "InvalidKubeletConfiguration",
            id="typo",
        ),
        pytest.param(
            "NodeClassCEL=false",
            "AL2",
            {"registryBurst": 20},
            "UnsupportedKubeletConfiguration",
            id="al2-unmanaged",
        ),
        pytest.param(
            "NodeClassCEL=false",
            "",
            {"maxPods": "min(110, vcpus * 20)"},
            "KubeletExpressionsDisabled",
            id="gate-off",
        ),
        pytest.param(
            "NodeClassCEL=true",
            "",
            {"maxPods": "min(110,"},
            "KubeletExpressionInvalid",
            id="syntax",
        ),
        pytest.param(
            "NodeClassCEL=true",
            "",
            {"kubeReserved": {"cpu": "1048576 / (vcpus - vcpus)"}},
            "KubeletExpressionEvaluationFailed",
            id="division-by-zero",
        ),
    ],
)
async def test_validation_verdicts(
    env: Env, gates: str, family: str, raw: dict[str, object], reason: str
) -> None:
    """A kubelet problem makes ValidationSucceeded (and Ready) False with its own reason."""
    p = provider(env, gates)
    resolver = factory.resolver(p, "1.31")
    cls = with_kubelet(env.classes.items["default"], raw)
    if family:
        cls = replace(cls, spec=replace(cls.spec, ami_family=family))
    status = await resolver.status(cls, NOW)
    cond = status.condition(nc.COND_VALIDATION)
    assert cond is not None
    assert (cond.status, cond.reason) == ("False", reason)
    assert status.ready() == "False"


@pytest.mark.asyncio
async def test_valid_expressions_keep_the_class_ready(env: Env) -> None:
    """With the gate on, expressions that evaluate for every type leave the class Ready."""
    p = provider(env, "NodeClassCEL=true")
    raw: dict[str, object] = {"maxPods": "min(110, vcpus * 20)", "registryBurst": 20}
    status = await factory.resolver(p, "1.31").status(
        with_kubelet(env.classes.items["default"], raw), NOW
    )
    assert status.ready() == "True", status.conditions


@pytest.mark.asyncio
async def test_expressions_shape_capacity_and_al2023_user_data(env: Env) -> None:
    """maxPods and kubeReserved are evaluated per type; AL2023 gets every other field too."""
    p = provider(env, "NodeClassCEL=true")
    raw: dict[str, object] = {
        "maxPods": "min(110, vcpus * 20)",
        "kubeReserved": {"cpu": "max(60, vcpus * 30)", "memory": "11 * max_pods + 255"},
        "registryBurst": 20,
        "shutdownGracePeriod": "30s",
    }
    env.classes.put(with_kubelet(env.classes.items["default"], raw))
    got = await p.create(claim("default-1", *SAME_SIZE))
    assert got.capacity["pods"] == 40_000
    (name,) = p.launch_templates.cached
    versions = await env.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
    text = base64.b64decode(
        versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    ).decode()
    assert '"maxPods": 40' in text
    assert '"registryBurst": 20' in text
    assert '"shutdownGracePeriod": "30s"' in text
    # 11 * 40 + 255 = 695 MiB, rounded up to the 16Mi step
    assert '"cpu": "60m"' in text
    assert '"memory": "704Mi"' in text
    assert "vcpus" not in text  # nothing expression-shaped reaches the node
