"""Metrics: every Prometheus series the controller exports, under upstream Karpenter's names.

``Metrics`` owns a private ``CollectorRegistry`` (never prometheus_client's global one), so each
operator (and each test) gets a fresh set, built once by the composition root and passed down.
Names and label sets follow upstream so existing dashboards and alerts keep working. Callers must
pass every label; an unknown label value is written as ``""`` rather than omitted, because a
Prometheus series cannot drop a label that its family declares.

Attribute naming rule: the metric name without the ``karpenter_`` prefix and without a
``_total`` or ``_seconds`` suffix, e.g. ``karpenter_nodeclaims_created_total`` is
``metrics.nodeclaims_created`` and ``karpenter_cloudprovider_duration_seconds`` is
``metrics.cloudprovider_duration``.
"""

from __future__ import annotations

import platform

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
from prometheus_client.exposition import generate_latest

# upstream's metrics.DurationBuckets: controller-runtime's defaults stretched out to 10 minutes
DURATION_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 25, 30, 40, 50, 60,
    70, 80, 90, 100, 110, 120, 150, 300, 450, 600,
)  # fmt: skip

_POD_STATE_LABELS = (
    "name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch",
    "capacity_type", "instance_type", "phase", "ready", "managed",
)  # fmt: skip
_DISRUPTED_LABELS = (
    "reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode",
)  # fmt: skip
_CLOUD_LABELS = ("controller", "method", "provider")
_OFFERING_LABELS = ("instance_type", "capacity_type", "zone")
# upstream's batcher SizeBuckets: request counts up to the largest batch (1000 fleet requests)
SIZE_BUCKETS: tuple[float, ...] = (
    1, 2, 4, 5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 125, 150, 175, 200,
    225, 250, 275, 300, 350, 400, 450, 500, 550, 600, 700, 800, 900, 1000,
)  # fmt: skip


class Metrics:
    """The controller's metric families on one private registry; ``render`` is /metrics."""

    def __init__(self, *, version: str = "dev", commit: str = "") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._nodeclaims(self.registry)
        self._nodes(self.registry)
        self._pods(self.registry)
        self._scheduling(self.registry)
        self._nodepools_and_cloud(self.registry)
        self._interruption(self.registry)
        self._aws_provider(self.registry)
        self.build_info = Gauge(
            "karpenter_build_info",
            "Build information; the value is always 1.",
            ("version", "goversion", "goarch", "commit"),
            registry=self.registry,
        )
        # upstream's label names are kept for dashboards; here "go" means the runtime underneath
        self.build_info.labels(
            version=version,
            goversion=f"python{platform.python_version()}",
            goarch=platform.machine(),
            commit=commit,
        ).set(1)

    def _nodeclaims(self, r: CollectorRegistry) -> None:
        self.nodeclaims_created = Counter(
            "karpenter_nodeclaims_created_total",
            "NodeClaims created, by reason (provisioning or a disruption method).",
            ("reason", "nodepool", "min_values_relaxed"),
            registry=r,
        )
        self.nodeclaims_launched = Counter(
            "karpenter_nodeclaims_launched_total",
            "NodeClaims whose instance the cloud provider launched.",
            ("nodepool",),
            registry=r,
        )
        self.nodeclaims_registered = Counter(
            "karpenter_nodeclaims_registered_total",
            "NodeClaims whose Node joined the cluster.",
            ("nodepool",),
            registry=r,
        )
        # not upstream (PublishNominations): placements told to the kube-scheduler
        self.pods_nominated = Counter(
            "karpenter_pods_nominated_total",
            "Pending pods whose status.nominatedNodeName was set to the Node planned for them.",
            registry=r,
        )
        self.pods_nomination_repairs = Counter(
            "karpenter_pods_nomination_repairs_total",
            "Nominations written again after the kube-scheduler cleared them on a pending pod.",
            registry=r,
        )
        self.nodeclaims_initialized = Counter(
            "karpenter_nodeclaims_initialized_total",
            "NodeClaims whose Node became ready with its resources registered.",
            ("nodepool",),
            registry=r,
        )
        self.nodeclaims_terminated = Counter(
            "karpenter_nodeclaims_terminated_total",
            "NodeClaims whose instance was terminated and finalizer removed.",
            ("nodepool", "capacity_type", "zone"),
            registry=r,
        )
        self.nodeclaims_unhealthy_disrupted = Counter(
            "karpenter_nodeclaims_unhealthy_disrupted_total",
            "NodeClaims deleted by node repair, by the unhealthy condition.",
            ("condition", "nodepool", "capacity_type", "image_id"),
            registry=r,
        )
        self.nodeclaims_disrupted = Counter(
            "karpenter_nodeclaims_disrupted_total",
            "NodeClaims deleted by a disruption (voluntary, liveness, interruption, GC).",
            _DISRUPTED_LABELS,
            registry=r,
        )
        self.nodeclaims_instance_termination_duration = Histogram(
            "karpenter_nodeclaims_instance_termination_duration_seconds",
            "Time from NodeClaim deletion until the cloud provider reports the instance gone.",
            ("nodepool",),
            buckets=DURATION_BUCKETS,
            registry=r,
        )

    def _nodes(self, r: CollectorRegistry) -> None:
        self.nodes_created = Counter(
            "karpenter_nodes_created_total",
            "Nodes registered by Karpenter.",
            ("nodepool", "zone"),
            registry=r,
        )
        self.nodes_terminated = Counter(
            "karpenter_nodes_terminated_total",
            "Nodes deleted by Karpenter after draining.",
            ("nodepool", "zone"),
            registry=r,
        )
        self.nodes_drained = Counter(
            "karpenter_nodes_drained_total",
            "Nodes whose pods were all drained (Drained became True).",
            ("nodepool",),
            registry=r,
        )
        self.nodes_termination_duration = Summary(
            "karpenter_nodes_termination_duration_seconds",
            "Time from a Node's deletion until its termination finalizer is removed.",
            ("nodepool",),
            registry=r,
        )

    def _pods(self, r: CollectorRegistry) -> None:
        self.pods_state = Gauge(
            "karpenter_pods_state",
            "One series per pod describing where it is; the value is always 1.",
            _POD_STATE_LABELS,
            registry=r,
        )
        self.pods_startup_duration = Summary(
            "karpenter_pods_startup_duration_seconds",
            "Time from pod creation until the pod is running.",
            registry=r,
        )
        self.pods_drained = Counter(
            "karpenter_pods_drained_total",
            "Pods evicted or deleted while draining a Node, by the NodeClaim's disruption reason.",
            ("reason",),
            registry=r,
        )
        self.pods_eviction_requests = Counter(
            "karpenter_pods_eviction_requests_total",
            "Eviction API calls while draining, by HTTP response code.",
            ("code",),
            registry=r,
        )

    def _scheduling(self, r: CollectorRegistry) -> None:
        self.scheduler_scheduling_duration = Histogram(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Time one scheduling simulation (Solve) took.",
            ("controller",),
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.voluntary_disruption_decisions = Counter(
            "karpenter_voluntary_disruption_decisions_total",
            "Disruption decisions carried out, by decision (delete/replace), reason and type.",
            ("decision", "reason", "consolidation_type"),
            registry=r,
        )
        self.voluntary_disruption_consolidation_timeouts = Counter(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            "Consolidation searches cut short by their time budget (they acted on what they had).",
            ("consolidation_type",),
            registry=r,
        )
        self.voluntary_disruption_queue_failures = Counter(
            "karpenter_voluntary_disruption_queue_failures_total",
            "Disruption commands rolled back: replacements that failed to launch or initialize.",
            ("decision", "reason", "consolidation_type"),
            registry=r,
        )
        self.operator_nodeclaim_status_condition_count = Gauge(
            "operator_nodeclaim_status_condition_count",
            "NodeClaims by status condition type, status and reason (upstream's operatorpkg).",
            ("type", "status", "reason", "nodepool"),
            registry=r,
        )
        self.operator_nodepool_status_condition_count = Gauge(
            "operator_nodepool_status_condition_count",
            "NodePools by status condition type, status and reason (upstream's operatorpkg).",
            ("type", "status", "reason"),
            registry=r,
        )
        self.operator_capacitybuffer_status_condition_count = Gauge(
            "operator_capacitybuffer_status_condition_count",
            "CapacityBuffers by status condition type, status and reason (upstream's operatorpkg).",
            ("type", "status", "reason"),
            registry=r,
        )
        self.voluntary_disruption_validation_failures = Counter(
            "karpenter_voluntary_disruption_validation_failures_total",
            "Commands dropped: a re-check after the validation wait disagreed (not upstream).",
            ("consolidation_type",),
            registry=r,
        )
        self.scheduler_unschedulable_pods_count = Gauge(
            "karpenter_scheduler_unschedulable_pods_count",
            "Pods the last scheduling simulation could not place.",
            ("controller",),
            registry=r,
        )
        self._cost(r)

    def _cost(self, r: CollectorRegistry) -> None:
        # Not upstream: the cost pass's figures for the last provisioning pass.
        self.scheduler_new_nodeclaims_price_per_hour = Gauge(
            "karpenter_scheduler_new_nodeclaims_price_per_hour",
            "Hourly price of the NodeClaims the last scheduling pass decided to create.",
            ("controller",),
            registry=r,
        )
        self.scheduler_new_nodeclaims_price_lower_bound_per_hour = Gauge(
            "karpenter_scheduler_new_nodeclaims_price_lower_bound_per_hour",
            "A price no valid set of NodeClaims for the same pods could undercut (last pass).",
            ("controller",),
            registry=r,
        )
        self.scheduler_new_nodeclaims_price_ratio = Gauge(
            "karpenter_scheduler_new_nodeclaims_price_ratio",
            "Price over lower bound of the last pass's NodeClaims (1 when both are 0).",
            ("controller",),
            registry=r,
        )

    def _nodepools_and_cloud(self, r: CollectorRegistry) -> None:
        self.nodepools_limit = Gauge(
            "karpenter_nodepools_limit",
            "The NodePool's resource limit, by resource type.",
            ("resource_type", "nodepool"),
            registry=r,
        )
        self.nodepools_usage = Gauge(
            "karpenter_nodepools_usage",
            "Resources the NodePool's nodes provide, by resource type.",
            ("resource_type", "nodepool"),
            registry=r,
        )
        self.nodepools_allowed_disruptions = Gauge(
            "karpenter_nodepools_allowed_disruptions",
            "Nodes of the NodePool its budgets let be disrupting at once for the reason (before"
            " those already disrupting are subtracted).",
            ("nodepool", "reason"),
            registry=r,
        )
        self.nodepools_nodes_consuming_budgets = Gauge(
            "karpenter_nodepools_nodes_consuming_budgets",
            "Nodes of the NodePool consuming its disruption budget now (disrupting or NotReady).",
            ("nodepool", "reason"),
            registry=r,
        )
        self.cluster_state_node_count = Gauge(
            "karpenter_cluster_state_node_count",
            "Nodes in the controller's cluster-state mirror.",
            registry=r,
        )
        self.cluster_state_synced = Gauge(
            "karpenter_cluster_state_synced",
            "1 when the cluster-state mirror agrees with the apiserver, else 0.",
            registry=r,
        )
        self.cloudprovider_duration = Histogram(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls.",
            _CLOUD_LABELS,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.cloudprovider_errors = Counter(
            "karpenter_cloudprovider_errors_total",
            "Cloud provider method calls that failed, by error type.",
            (*_CLOUD_LABELS, "error"),
            registry=r,
        )

    def _interruption(self, r: CollectorRegistry) -> None:
        self.interruption_received_messages = Counter(
            "karpenter_interruption_received_messages_total",
            "Interruption queue messages received, by parsed kind.",
            ("message_type",),
            registry=r,
        )
        self.interruption_deleted_messages = Counter(
            "karpenter_interruption_deleted_messages_total",
            "Interruption queue messages deleted after handling.",
            registry=r,
        )
        self.interruption_message_queue_duration = Histogram(
            "karpenter_interruption_message_queue_duration_seconds",
            "Time from the event's timestamp until the controller handled it.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )

    def _aws_provider(self, r: CollectorRegistry) -> None:
        # the offering and instance-type families are upstream core's; only AWS feeds them here
        self.cloudprovider_instance_type_offering_available = Gauge(
            "karpenter_cloudprovider_instance_type_offering_available",
            "1 when the offering (instance type, capacity type, zone) can be launched, else 0.",
            _OFFERING_LABELS,
            registry=r,
        )
        self.cloudprovider_instance_type_offering_price_estimate = Gauge(
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            "The offering's estimated hourly price.",
            _OFFERING_LABELS,
            registry=r,
        )
        self.cloudprovider_instance_type_cpu_cores = Gauge(
            "karpenter_cloudprovider_instance_type_cpu_cores",
            "vCPUs of an instance type.",
            ("instance_type",),
            registry=r,
        )
        self.cloudprovider_instance_type_memory_bytes = Gauge(
            "karpenter_cloudprovider_instance_type_memory_bytes",
            "Memory capacity, in bytes, of an instance type.",
            ("instance_type",),
            registry=r,
        )
        self.cloudprovider_batcher_batch_time = Histogram(
            "karpenter_cloudprovider_batcher_batch_time_seconds",
            "How long a batcher's window stayed open before its batch ran.",
            ("batcher",),
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.cloudprovider_batcher_batch_size = Histogram(
            "karpenter_cloudprovider_batcher_batch_size",
            "Requests merged into one batch.",
            ("batcher",),
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.nodeclass_userdata_bytes = Gauge(
            "karpenter_nodeclass_userdata_bytes",
            "Size in bytes of the rendered user data (before base64) of the EC2NodeClass.",
            ("nodeclass",),
            registry=r,
        )

    @property
    def provisioner_scheduling_duration(self) -> Histogram:
        """Older upstream name of ``scheduler_scheduling_duration`` (same family)."""
        return self.scheduler_scheduling_duration

    def render(self) -> bytes:
        """The Prometheus text exposition of every family (the /metrics body)."""
        return generate_latest(self.registry)
