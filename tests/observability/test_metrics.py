"""Metrics: upstream names and label sets render on a private registry."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, Summary
from prometheus_client.parser import text_string_to_metric_families

from karpenter.observability.metrics import Metrics

Family = Counter | Gauge | Histogram | Summary

# (attribute, exposed sample name, label names) as upstream names them
EXPECTED = [
    ("voluntary_disruption_queue_failures", "karpenter_voluntary_disruption_queue_failures_total",
     ("decision", "reason", "consolidation_type")),
    ("operator_nodeclaim_status_condition_count", "operator_nodeclaim_status_condition_count",
     ("type", "status", "reason", "nodepool")),
    ("operator_nodepool_status_condition_count", "operator_nodepool_status_condition_count",
     ("type", "status", "reason")),
    ("operator_capacitybuffer_status_condition_count",
     "operator_capacitybuffer_status_condition_count", ("type", "status", "reason")),
    ("nodeclaims_created", "karpenter_nodeclaims_created_total",
     ("reason", "nodepool", "min_values_relaxed")),
    ("nodeclaims_launched", "karpenter_nodeclaims_launched_total", ("nodepool",)),
    ("nodeclaims_registered", "karpenter_nodeclaims_registered_total", ("nodepool",)),
    ("nodeclaims_initialized", "karpenter_nodeclaims_initialized_total", ("nodepool",)),
    ("nodeclaims_terminated", "karpenter_nodeclaims_terminated_total",
     ("nodepool", "capacity_type", "zone")),
    ("nodeclaims_disrupted", "karpenter_nodeclaims_disrupted_total",
     ("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode")),
    ("nodes_created", "karpenter_nodes_created_total", ("nodepool", "zone")),
    ("nodes_terminated", "karpenter_nodes_terminated_total", ("nodepool", "zone")),
    ("nodes_drained", "karpenter_nodes_drained_total", ("nodepool",)),
    ("nodes_termination_duration", "karpenter_nodes_termination_duration_seconds",
     ("nodepool",)),
    ("pods_drained", "karpenter_pods_drained_total", ("reason",)),
    ("pods_eviction_requests", "karpenter_pods_eviction_requests_total", ("code",)),
    ("scheduler_scheduling_duration", "karpenter_scheduler_scheduling_duration_seconds",
     ("controller",)),
    ("pods_startup_duration", "karpenter_pods_startup_duration_seconds", ()),
    ("cloudprovider_errors", "karpenter_cloudprovider_errors_total",
     ("controller", "method", "provider", "error")),
    ("cloudprovider_duration", "karpenter_cloudprovider_duration_seconds",
     ("controller", "method", "provider")),
    ("nodepools_limit", "karpenter_nodepools_limit", ("resource_type", "nodepool")),
    ("nodepools_usage", "karpenter_nodepools_usage", ("resource_type", "nodepool")),
    ("nodepools_allowed_disruptions", "karpenter_nodepools_allowed_disruptions",
     ("nodepool", "reason")),
    ("nodepools_nodes_consuming_budgets", "karpenter_nodepools_nodes_consuming_budgets",
     ("nodepool", "reason")),
    ("pods_state", "karpenter_pods_state",
     ("name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch",
      "capacity_type", "instance_type", "phase", "ready", "managed")),
    ("interruption_received_messages", "karpenter_interruption_received_messages_total",
     ("message_type",)),
    ("interruption_deleted_messages", "karpenter_interruption_deleted_messages_total", ()),
    ("interruption_message_queue_duration",
     "karpenter_interruption_message_queue_duration_seconds", ()),
    ("cloudprovider_instance_type_offering_available",
     "karpenter_cloudprovider_instance_type_offering_available",
     ("instance_type", "capacity_type", "zone")),
    ("cloudprovider_instance_type_offering_price_estimate",
     "karpenter_cloudprovider_instance_type_offering_price_estimate",
     ("instance_type", "capacity_type", "zone")),
    ("cloudprovider_instance_type_cpu_cores", "karpenter_cloudprovider_instance_type_cpu_cores",
     ("instance_type",)),
    ("cloudprovider_instance_type_memory_bytes",
     "karpenter_cloudprovider_instance_type_memory_bytes", ("instance_type",)),
    ("cloudprovider_batcher_batch_time", "karpenter_cloudprovider_batcher_batch_time_seconds",
     ("batcher",)),
    ("cloudprovider_batcher_batch_size", "karpenter_cloudprovider_batcher_batch_size",
     ("batcher",)),
    ("nodeclass_userdata_bytes", "karpenter_nodeclass_userdata_bytes", ("nodeclass",)),
]  # fmt: skip


def _bump(family: Family) -> None:
    names = family._labelnames
    labelled = family.labels(*(f"v{i}" for i in range(len(names)))) if names else family
    if isinstance(labelled, Counter):
        labelled.inc()
    elif isinstance(labelled, Gauge):
        labelled.set(3)
    else:
        labelled.observe(0.2)


def _samples(metrics: Metrics) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(dict(sample.labels))
    return out


@pytest.mark.parametrize(
    ("attr", "sample", "labels"), [pytest.param(*e, id=e[0]) for e in EXPECTED]
)
def test_family_renders_with_upstream_name_and_labels(
    attr: str, sample: str, labels: tuple[str, ...]
) -> None:
    """Each family, once used, renders under upstream's name with exactly upstream's labels."""
    metrics = Metrics()
    family = getattr(metrics, attr)
    assert tuple(family._labelnames) == labels
    _bump(family)
    name = (
        sample
        if sample.endswith("_total")
        else sample + ("" if isinstance(family, Gauge) else "_count")
    )
    rendered = _samples(metrics)
    assert name in rendered, sorted(rendered)
    assert set(rendered[name][0]) == set(labels)


def test_attribute_names_follow_the_rule() -> None:
    """Every family attribute is its metric name minus karpenter_ and a _total/_seconds suffix."""
    metrics = Metrics()
    for attr, value in vars(metrics).items():
        if not isinstance(value, Counter | Gauge | Histogram | Summary):
            continue
        name = value._name.removeprefix("karpenter_").removesuffix("_seconds")
        assert attr == name.removesuffix("_total"), (attr, value._name)


def test_labels_render_values() -> None:
    """Label values a controller passes appear verbatim on the rendered sample."""
    metrics = Metrics()
    metrics.nodeclaims_created.labels(
        reason="provisioning", nodepool="default", min_values_relaxed="false"
    ).inc(2)
    text = metrics.render().decode()
    assert (
        'karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",'
        'reason="provisioning"} 2.0'
    ) in text
    assert "# TYPE karpenter_nodeclaims_created_total counter" in text


def test_build_info_is_one() -> None:
    """karpenter_build_info carries the version and commit with value 1."""
    metrics = Metrics(version="1.2.3", commit="abc")
    [info] = _samples(metrics)["karpenter_build_info"]
    assert (info["version"], info["commit"]) == ("1.2.3", "abc")
    assert set(info) == {"version", "goversion", "goarch", "commit"}


def test_registries_are_private() -> None:
    """Two Metrics never collide and nothing lands in prometheus_client's global registry."""
    first, second = Metrics(), Metrics()
    first.nodes_created.labels(nodepool="a", zone="z").inc()
    assert "karpenter_nodes_created_total" not in second.render().decode().split("# TYPE")[-1]
    assert 'nodepool="a"' not in second.render().decode()
    assert REGISTRY.get_sample_value("karpenter_build_info") is None


def test_old_scheduling_duration_name_is_the_same_family() -> None:
    """provisioner_scheduling_duration is an alias of scheduler_scheduling_duration."""
    metrics = Metrics()
    assert metrics.provisioner_scheduling_duration is metrics.scheduler_scheduling_duration
