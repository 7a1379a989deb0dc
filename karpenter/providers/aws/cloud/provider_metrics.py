"""Feeding the AWS provider's Prometheus families: offerings, batchers, user-data size.

The provider itself knows nothing of metrics; ``attach`` hooks its batchers, its launch
templates and its insufficient-capacity memory (each pool hidden is logged and its offering
gauge drops to 0 at once) to a ``Metrics`` (the composition root calls it once), and
``publish_offerings`` rewrites the offering and instance-type gauges from the NodeClasses'
catalogues, which the runtime does every minute as upstream does.

User data is measured when a launch template is created, the only time it is rendered into
EC2 (the template name hashes the user data, so any change makes a new template and a new
reading). EC2 rejects user data above 16 KiB; from 90% of that a warning is logged so growth
(certificate bundles, custom user data) shows before launches start failing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from karpenter.providers.aws.cloud import templates
from karpenter.providers.aws.core import tags as awstags

if TYPE_CHECKING:
    from karpenter.core.model.instancetype import InstanceType
    from karpenter.observability.metrics import Metrics
    from karpenter.providers.aws.cloud.launchtemplates import Content
    from karpenter.providers.aws.cloud.provider import AWSCloudProvider

USER_DATA_WARN_BYTES = templates.USER_DATA_LIMIT * 9 // 10
BATCHERS = ("create_fleet", "describe_instances", "terminate_instances")


def attach(provider: AWSCloudProvider, metrics: Metrics, log: Any) -> None:
    """Record the provider's batches and created templates' user data in ``metrics``."""
    provider.fleets.batcher.on_batch = functools.partial(_batch, metrics, BATCHERS[0])
    provider.instances.describe_batcher.on_batch = functools.partial(_batch, metrics, BATCHERS[1])
    provider.instances.terminate_batcher.on_batch = functools.partial(_batch, metrics, BATCHERS[2])
    provider.launch_templates.on_create = functools.partial(_user_data, metrics, log)
    provider.on_unavailable = functools.partial(
        _unavailable, metrics, log, provider.unavailable.ttl
    )


def _unavailable(
    metrics: Metrics,
    log: Any,
    ttl: float,
    code: str,
    instance_type: str,
    zone: str,
    capacity_type: str,
) -> None:
    """A pool EC2 had no capacity in: logged (upstream logs the same removal) and shown as
    unavailable at once, not only at the next minute's gauge refresh."""
    labels = {"instance_type": instance_type, "capacity_type": capacity_type, "zone": zone}
    metrics.cloudprovider_instance_type_offering_available.labels(**labels).set(0)
    log.info("removing offering from offerings", reason=code, ttl_seconds=ttl, **labels)


def _batch(metrics: Metrics, name: str, size: int, seconds: float) -> None:
    metrics.cloudprovider_batcher_batch_size.labels(batcher=name).observe(size)
    metrics.cloudprovider_batcher_batch_time.labels(batcher=name).observe(seconds)


def _user_data(metrics: Metrics, log: Any, content: Content) -> None:
    size = len(content.user_data.encode())
    nodeclass = content.tags.get(awstags.NODECLASS, "")
    metrics.nodeclass_userdata_bytes.labels(nodeclass=nodeclass).set(size)
    if size >= USER_DATA_WARN_BYTES:
        log.warning(
            "user data is approaching the EC2 limit",
            nodeclass=nodeclass,
            bytes=size,
            limit=templates.USER_DATA_LIMIT,
        )


def publish_offerings(metrics: Metrics, instance_types: Iterable[InstanceType]) -> int:
    """Replace the offering and instance-type gauges; returns the offerings published.

    A type may appear once per NodeClass: an offering counts as available when any class can
    launch it. The gauges are cleared first so offerings that disappeared stop being exported.
    """
    available: dict[tuple[str, str, str], bool] = {}
    prices: dict[tuple[str, str, str], float] = {}
    sizes: dict[str, tuple[float, float]] = {}
    for it in instance_types:
        sizes[it.name] = (it.capacity.get("cpu", 0) / 1000, it.capacity.get("memory", 0) / 1000)
        for o in it.offerings:
            key = (it.name, o.capacity_type, o.zone)
            available[key] = available.get(key, False) or o.available
            prices[key] = o.price
    gauges = (
        metrics.cloudprovider_instance_type_offering_available,
        metrics.cloudprovider_instance_type_offering_price_estimate,
        metrics.cloudprovider_instance_type_cpu_cores,
        metrics.cloudprovider_instance_type_memory_bytes,
    )
    for gauge in gauges:
        gauge.clear()
    # no await between clear and set: a scrape never sees the families half rebuilt
    for (name, capacity_type, zone), ok in sorted(available.items()):
        labels = {"instance_type": name, "capacity_type": capacity_type, "zone": zone}
        gauges[0].labels(**labels).set(1 if ok else 0)
        gauges[1].labels(**labels).set(prices[(name, capacity_type, zone)])
    for name, (cpu, memory) in sorted(sizes.items()):
        gauges[2].labels(instance_type=name).set(cpu)
        gauges[3].labels(instance_type=name).set(memory)
    return len(available)
