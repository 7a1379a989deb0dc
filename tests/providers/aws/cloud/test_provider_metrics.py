"""The AWS provider's Prometheus families against moto: batches, user-data size, offerings."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest
import structlog

from karpenter.observability.logging import get_logger
from karpenter.observability.metrics import Metrics
from karpenter.providers.aws.cloud import provider_metrics
from tests.providers.aws.cloud.conftest import Moto
from tests.providers.aws.cloud.fixtures import Env, claim, env, prices

__all__ = ("env", "prices")


def sample(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


@pytest.mark.asyncio
async def test_launch_records_batches_and_user_data_size(env: Env) -> None:
    """A launch observes one create_fleet batch of one and the class's user-data size."""
    metrics = Metrics()
    provider_metrics.attach(env.provider, metrics, get_logger("test"))
    got = await env.provider.create(claim("default-1", "m5.large"))
    await env.provider.get(got.provider_id)
    fleet = {"batcher": "create_fleet"}
    assert sample(metrics, "karpenter_cloudprovider_batcher_batch_size_count", **fleet) == 1
    assert sample(metrics, "karpenter_cloudprovider_batcher_batch_size_sum", **fleet) == 1
    assert sample(metrics, "karpenter_cloudprovider_batcher_batch_time_seconds_count", **fleet) == 1
    describe = {"batcher": "describe_instances"}
    assert sample(metrics, "karpenter_cloudprovider_batcher_batch_size_count", **describe) == 1
    (name,) = env.provider.launch_templates.cached
    versions = await env.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
    user_data = base64.b64decode(
        versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    )
    got_bytes = sample(metrics, "karpenter_nodeclass_userdata_bytes", nodeclass="default")
    assert got_bytes == len(user_data)


@pytest.mark.asyncio
async def test_user_data_near_the_limit_warns(env: Env) -> None:
    """User data at 90% or more of EC2's 16 KiB logs a warning; smaller user data does not."""
    metrics = Metrics()
    provider_metrics.attach(env.provider, metrics, get_logger("test"))
    with structlog.testing.capture_logs() as logs:
        await env.provider.create(claim("default-1", "m5.large"))
    assert not [e for e in logs if e["event"] == "user data is approaching the EC2 limit"]
    cls = env.classes.items["default"]
    env.classes.put(replace(cls, spec=replace(cls.spec, user_data="#" * 14800)))
    with structlog.testing.capture_logs() as logs:
        await env.provider.create(claim("default-2", "m5.large"))
    (warning,) = [e for e in logs if e["event"] == "user data is approaching the EC2 limit"]
    assert warning["log_level"] == "warning" and warning["nodeclass"] == "default"
    assert provider_metrics.USER_DATA_WARN_BYTES <= warning["bytes"] <= 16384
    assert sample(metrics, "karpenter_nodeclass_userdata_bytes", nodeclass="default") == float(
        warning["bytes"]
    )


@pytest.mark.asyncio
async def test_offering_gauges_follow_the_catalogue(env: Env) -> None:
    """Offerings export availability and price; an ICE'd offering reads 0; gone types vanish."""
    metrics = Metrics()
    cls = env.classes.items["default"]
    count = provider_metrics.publish_offerings(metrics, env.provider.catalog(cls))
    assert count > 0
    od = {"instance_type": "m5.large", "capacity_type": "on-demand", "zone": "us-east-1a"}
    offering = "karpenter_cloudprovider_instance_type_offering_available"
    assert sample(metrics, offering, **od) == 1
    price = sample(metrics, "karpenter_cloudprovider_instance_type_offering_price_estimate", **od)
    assert price is not None and price > 0
    cores = "karpenter_cloudprovider_instance_type_cpu_cores"
    assert sample(metrics, cores, instance_type="m5.large") == 2
    memory = sample(
        metrics, "karpenter_cloudprovider_instance_type_memory_bytes", instance_type="m5.large"
    )
    assert memory is not None and 7 * 2**30 < memory <= 8 * 2**30
    env.provider.unavailable.mark("on-demand", "m5.large", "us-east-1a", env.provider.now())
    provider_metrics.publish_offerings(metrics, env.provider.catalog(cls))
    assert sample(metrics, offering, **od) == 0
    provider_metrics.publish_offerings(metrics, ())
    assert sample(metrics, offering, **od) is None
    assert sample(metrics, cores, instance_type="m5.large") is None


@pytest.mark.asyncio
async def test_insufficient_capacity_is_logged_and_shown_at_once(env: Env, moto: Moto) -> None:
    """A pool CreateFleet found without capacity is logged with its reason and its offering
    gauge reads 0 right away (regression: the fallback hid it silently; docs/reliability.md)."""
    metrics = Metrics()
    provider_metrics.attach(env.provider, metrics, get_logger("test"))
    moto.capacity.empty |= {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")}
    with structlog.testing.capture_logs() as logs:
        got = await env.provider.create(claim("default-1", "c5.large", "m5.large"))
    assert got.labels["node.kubernetes.io/instance-type"] == "m5.large"
    removed = [e for e in logs if e["event"] == "removing offering from offerings"]
    assert {(e["instance_type"], e["zone"]) for e in removed} == {
        ("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")
    }  # fmt: skip
    assert all(e["reason"] == "InsufficientInstanceCapacity" for e in removed)
    for zone in ("us-east-1a", "us-east-1b"):
        labels = {"instance_type": "c5.large", "capacity_type": "on-demand", "zone": zone}
        name = "karpenter_cloudprovider_instance_type_offering_available"
        assert sample(metrics, name, **labels) == 0
