"""The AWS composition: the provider, its EC2NodeClass mirror and its controllers, on kube state.

``open_aws`` reads the kube-dns address, opens the provider (``cloud.aws.factory``) and binds
the AWS controllers, which are written against small Protocols, to the real cluster:
EC2NodeClasses come from their own informer-fed store; NodeClaims and Nodes from the
operator's mirror; writes go through the kube client. It returns what the operator runs: the
cloud, the extra informer, and the controllers that act only on the leader (NodeClass status
and finalizer, interruption queue, instance health, instance tagging after registration,
instance and instance-profile garbage collection, price and instance-type refresh, offering
metrics).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import aiohttp
import anyio
import anyio.abc

from karpenter.aio.clock import Clock
from karpenter.api import decode
from karpenter.api.ec2nodeclass_status import status_doc
from karpenter.cloud.aws import factory, provider_metrics, sqs
from karpenter.cloud.aws import zonalshift as arc_zonalshift
from karpenter.cloud.aws.factory import open_provider
from karpenter.cloud.aws.provider import AWSCloudProvider
from karpenter.controllers import aws_partition as partitions
from karpenter.controllers import aws_tagging as tagging
from karpenter.controllers.aws_capacity_blocks import CapacityBlockExpiration
from karpenter.controllers.aws_capacity_type import CapacityTypeSync
from karpenter.controllers.aws_gc import GarbageCollector
from karpenter.controllers.aws_health import HealthController
from karpenter.controllers.aws_interruption import InterruptionController
from karpenter.controllers.aws_nodeclass import NodeClassController
from karpenter.controllers.aws_profile_gc import ProfileCollector
from karpenter.controllers.aws_refresh import Refresher
from karpenter.controllers.aws_zonalshift import ZonalShiftPoller
from karpenter.core.aws import hashmigration, tags, zonalshift
from karpenter.core.aws import interruption as interruption_msg
from karpenter.core.aws import labels as awslbl
from karpenter.core.aws import nodeclass as nc
from karpenter.core.aws import reservations as rsv
from karpenter.core.model.cluster import Options
from karpenter.core.model.node import NodeClaim
from karpenter.core.scheduling.requirements import from_selector_terms
from karpenter.kube import codec, errors
from karpenter.kube.client import (
    EC2NODECLASSES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    SERVICES,
    KubeClient,
    Obj,
    Resource,
)
from karpenter.kube.events import EventRecorder
from karpenter.kube.informers import Sink
from karpenter.observability.logging import get_logger
from karpenter.observability.metrics import Metrics
from karpenter.settings import AWSSettings, Settings
from karpenter.state.cluster import ClusterState, KindStore

NODECLASS_FINALIZER = "karpenter.k8s.aws/termination"
_KUBE_ERRORS = (errors.ApiError, aiohttp.ClientError, OSError)

Service = Callable[..., Coroutine[Any, Any, None]]


class NodeClasses:
    """EC2NodeClasses: the mirror the provider reads, and the writer of status/finalizer."""

    def __init__(self, kube: KubeClient, clock: Clock) -> None:
        self.kube = kube
        self.clock = clock
        self.changed = anyio.Event()
        self.store: KindStore[nc.EC2NodeClass] = KindStore(
            "EC2NodeClass", decode.ec2_node_class, self._notify
        )

    def _notify(self, kind: str, key: str, obj: Obj | None) -> None:
        del kind, key, obj
        self.changed.set()

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        """The NodeClass by name (None when absent or invalid)."""
        return self.store.get(name)

    async def patch(
        self, name: str, status: nc.Status, annotations: dict[str, str], finalizer: bool
    ) -> None:
        """Write the status (subresource), the annotations and the finalizer."""
        raw = self.store.raw(name)
        if raw is None:
            return
        meta = raw.get("metadata") or {}
        finalizers = [f for f in meta.get("finalizers") or [] if f != NODECLASS_FINALIZER]
        if finalizer:
            finalizers.append(NODECLASS_FINALIZER)
        try:
            if finalizer:
                body = {"status": status_doc(status, codec.rfc3339(self.clock.now()))}
                obj = await self.kube.merge_patch(EC2NODECLASSES, name, body, subresource="status")
                self.store.upsert(obj)
            patch = {"metadata": {"annotations": annotations, "finalizers": finalizers}}
            self.store.upsert(await self.kube.merge_patch(EC2NODECLASSES, name, patch))
        except errors.NotFound:
            return


class ClaimsView:
    """NodeClaims and Nodes for the AWS controllers, from the operator's mirror."""

    def __init__(self, kube: KubeClient, state: ClusterState) -> None:
        self.kube = kube
        self.state = state

    async def find_by_instance_id(self, instance_id: str) -> NodeClaim | None:
        """The claim whose provider id names this instance."""
        for claim in self.state.nodeclaims.values():
            if claim.provider_id and tags.instance_id(claim.provider_id) == instance_id:
                return claim
        return None

    def all(self) -> list[NodeClaim]:
        """Every NodeClaim in the mirror."""
        return list(self.state.nodeclaims.values())

    async def relabel(self, claim: NodeClaim, labels: dict[str, str | None]) -> None:
        """Merge labels into a NodeClaim and its Node (``None`` removes one)."""
        patch = {"metadata": {"labels": labels}}
        with contextlib.suppress(errors.NotFound):
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, claim.name, patch))
        for raw in self.state.node_by_provider_id(claim.provider_id):
            name = str((raw.get("metadata") or {}).get("name", ""))
            with contextlib.suppress(errors.NotFound):
                await self.kube.merge_patch(NODES, name, patch)

    async def delete(self, name: str) -> None:
        """Delete a NodeClaim (its termination finalizer drains and terminates)."""
        with contextlib.suppress(errors.NotFound):
            await self.kube.delete(NODECLAIMS, name)

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        """Merge annotations into a NodeClaim."""
        with contextlib.suppress(errors.NotFound):
            patch = {"metadata": {"annotations": annotations}}
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))

    async def label(self, name: str, node_name: str, labels: dict[str, str]) -> None:
        """Merge labels into a NodeClaim and, when registered, its Node."""
        with contextlib.suppress(errors.NotFound):
            patch = {"metadata": {"labels": labels}}
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))
            if node_name:
                self.state.nodes.upsert(await self.kube.merge_patch(NODES, node_name, patch))

    async def label_partitions(self, reader: partitions.PartitionReader) -> float:
        """Label the partitions EC2 assigned to claims launched without one."""
        for claim in self.state.nodeclaims.values():
            await partitions.reconcile(claim, reader, self)
        return partitions.PERIOD_SECONDS

    async def tag_all(self, tagger: tagging.Tagger) -> float:
        """Tag the instances of newly registered claims (one at a time, as upstream)."""
        for claim in self.state.nodeclaims.values():
            await tagging.reconcile(claim, tagger, self)
        return 10.0

    async def claimed_provider_ids(self) -> set[str]:
        """Provider ids of every NodeClaim."""
        return {c.provider_id for c in self.state.nodeclaims.values() if c.provider_id}

    async def delete_node(self, provider_id: str) -> None:
        """Delete the Node of an instance that has no NodeClaim."""
        for raw in self.state.node_by_provider_id(provider_id):
            name = str((raw.get("metadata") or {}).get("name", ""))
            with contextlib.suppress(errors.NotFound):
                await self.kube.delete(NODES, name)

    async def names_for_nodeclass(self, name: str) -> list[str]:
        """NodeClaims that reference the EC2NodeClass ``name``."""
        return [c.name for c in await self.claim_hashes(name)]

    async def claim_hashes(self, nodeclass: str) -> list[hashmigration.ClaimHash]:
        """The class's NodeClaims with their annotations and whether a Drifted condition is set."""
        out = []
        for key, entry in self.state.nodeclaims.entries.items():
            ref = (entry.raw.get("spec") or {}).get("nodeClassRef") or {}
            if ref.get("name") != nodeclass or ref.get("kind", "EC2NodeClass") != "EC2NodeClass":
                continue
            annotations = codec.meta(entry.raw).get("annotations") or {}
            drifted = codec.condition(entry.raw, "Drifted") is not None
            out.append(hashmigration.ClaimHash(key, dict(annotations), drifted))
        return sorted(out, key=lambda c: c.name)


@dataclass
class ClaimEvents:
    """The interruption controller's synchronous ``publish``, posted by a background task."""

    recorder: EventRecorder
    claims: KindStore[NodeClaim]
    pending: list[tuple[NodeClaim, str, str]] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)

    def publish(self, claim: NodeClaim, reason: str, message: str) -> None:
        """Queue one Event about ``claim``."""
        self.pending.append((claim, reason, message))
        self.wake.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Post queued Events until cancelled."""
        task_status.started()
        while True:
            await self.wake.wait()
            self.wake = anyio.Event()
            batch, self.pending = self.pending, []
            for claim, reason, message in batch:
                raw = self.claims.raw(claim.name) or {}
                involved = {
                    "apiVersion": NODECLAIMS.api_version,
                    "kind": "NodeClaim",
                    "name": claim.name,
                    "uid": str((raw.get("metadata") or {}).get("uid", "")),
                }
                await self.recorder.publish(involved, "Warning", reason, message)


def core_options(settings: Settings) -> Options:
    """The core's options plus AWS's reservation labels (the core takes them as data)."""
    return replace(
        settings.core_options(),
        reservation_id_label=rsv.ID_LABEL,
        reservation_labels=frozenset(rsv.LABELS),
    )


@dataclass
class AWSRuntime:
    """What the operator runs for AWS."""

    cloud: AWSCloudProvider
    informers: list[tuple[Resource, Sink]]
    leader_services: list[Service]


def _every(clock: Clock, name: str, once: Callable[[], Awaitable[float]]) -> Service:
    """A service that runs ``once`` and sleeps the seconds it returns, logging failures."""
    log = get_logger("aws").bind(controller=name)

    async def loop(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                wait = await once()
            except Exception as err:  # one failed pass must not stop the controller
                log.error("reconcile failed", error=str(err))
                wait = 30.0
            await clock.sleep(max(wait, 1.0))

    return loop


@contextlib.asynccontextmanager
async def open_aws(
    kube: KubeClient,
    state: ClusterState,
    recorder: EventRecorder,
    settings: AWSSettings,
    clock: Clock,
    *,
    endpoint_url: str | None = None,
    session: Any = None,
    min_values_best_effort: bool = False,
    metrics: Metrics | None = None,
    reserved_capacity: bool = True,
) -> AsyncIterator[AWSRuntime]:
    """The AWS provider and its controllers bound to this cluster's state
    (``reserved_capacity``: the ReservedCapacity feature gate)."""
    metrics = metrics if metrics is not None else Metrics()
    classes = NodeClasses(kube, clock)
    claims = ClaimsView(kube, state)
    async with open_provider(
        settings,
        classes,
        clock.now,
        endpoint_url=endpoint_url,
        session=session,
        cluster_dns=await kube_dns_ip(kube),
        min_values_best_effort=min_values_best_effort,
    ) as cloud:
        # AMI aliases resolve through SSM paths named after the cluster's Kubernetes version
        # (EKS's own when EKS_CONTROL_PLANE is set, else the apiserver's).
        version = cloud.eks_version or await kube.server_version()
        resolver = factory.resolver(cloud, version, reserved_capacity)
        nodeclass = NodeClassController(
            classes,
            claims,
            resolver,
            cloud.launch_templates,
            clock.now,
            settings.ISOLATED_VPC,
            hashes=claims,
            ca_bundle=cloud.settings.CLUSTER_CA_BUNDLE,
        )
        gc = GarbageCollector(cloud, claims, clock.now)
        health = HealthController(cloud.clients.ec2, claims, clock.now)
        refresher = Refresher(cloud, clock.now, settings.ISOLATED_VPC)
        blocks = CapacityBlockExpiration(claims, classes, clock.now)
        demotion = CapacityTypeSync(claims, cloud)
        events = ClaimEvents(recorder, state.nodeclaims)
        provider_metrics.attach(cloud, metrics, get_logger("aws").bind(controller="metrics"))

        async def offerings() -> float:
            ready = [c for c in classes.store.values() if c.status.ready() == "True"]
            provider_metrics.publish_offerings(
                metrics, (it for c in ready for it in cloud.catalog(c))
            )
            return 60.0  # upstream refreshes these gauges every minute

        async def nodeclasses(
            *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
        ) -> None:
            log = get_logger("aws").bind(controller="nodeclass")
            task_status.started()
            while True:
                classes.changed = anyio.Event()
                wait = 300.0
                for name in sorted(classes.store.entries):
                    try:
                        result = await nodeclass.reconcile(name)
                    except Exception as err:  # keep reconciling the others
                        log.error("reconcile failed", nodeclass=name, error=str(err))
                        result_wait = 10.0
                    else:
                        result_wait = result.requeue_after or wait
                    wait = min(wait, result_wait)
                with anyio.move_on_after(wait):
                    await classes.changed.wait()

        services: list[Service] = [
            nodeclasses,
            events.run,
            _every(clock, "instance.garbagecollection", lambda: _second(gc.reconcile())),
            _every(clock, "interruption.instancestatus", lambda: _second(health.reconcile())),
            _every(clock, "nodeclaim.tagging", lambda: claims.tag_all(cloud)),
            _every(clock, "nodeclaim.partition", lambda: claims.label_partitions(cloud)),
            _every(clock, "providers.pricing", refresher.prices),
            _every(clock, "providers.instancetype", refresher.instance_types),
            _every(clock, "metrics.offerings", offerings),
            _every(clock, "capacityreservation.expiration", blocks.reconcile),
            _every(clock, "capacityreservation.capacitytype", demotion.reconcile),
        ]
        if not settings.ISOLATED_VPC:
            profiles = ProfileCollector(
                cloud.clients.iam,
                settings.AWS_REGION,
                settings.CLUSTER_NAME,
                _ProfileRefs(classes, state),
                clock.now,
            )
            services.append(
                _every(
                    clock,
                    "instanceprofile.garbagecollection",
                    lambda: _second(profiles.reconcile()),
                )
            )
        if settings.ENABLE_ZONAL_SHIFT:
            audience = _ShiftAudience(state, classes, recorder)
            services.extend(await _zonal_shift(cloud, clock, audience))
        if settings.INTERRUPTION_QUEUE:
            interruption = InterruptionController(
                claims,
                cloud.unavailable,
                clock.now,
                events,
                reservations=cloud.reservation_availability,
            )
            services.append(
                _interruptions(cloud, interruption, settings.INTERRUPTION_QUEUE, clock, metrics)
            )
        yield AWSRuntime(cloud, [(EC2NODECLASSES, classes.store)], services)


async def kube_dns_ip(kube: KubeClient) -> str:
    """The ``kube-system/kube-dns`` Service address: the nodes' cluster DNS, and the cluster's IP
    family (IPv6 when it is). ``""`` when it cannot be read: like upstream, a cluster without
    kube-dns (or without the RBAC to read it) still runs, with DNS left to the NodeClass."""
    try:
        svc = await kube.get(SERVICES, "kube-dns", "kube-system")
    except _KUBE_ERRORS as err:
        get_logger("aws").info("unable to detect the IP of the kube-dns service", error=str(err))
        return ""
    ip = (svc.get("spec") or {}).get("clusterIP") or ""
    return "" if ip == "None" else str(ip)  # "None": a headless Service has no address


async def _zonal_shift(
    cloud: AWSCloudProvider, clock: Clock, audience: _ShiftAudience
) -> list[Service]:
    """The 30s zonal-shift poll, when ARC manages the cluster (else none, as upstream now)."""
    arn = cloud.cluster_arn
    if not arn or not await arc_zonalshift.registered(cloud.clients.arc, arn):
        get_logger("aws").warning("cluster is not registered with ARC zonal shift", arn=arn)
        return []
    poller = ZonalShiftPoller(cloud, cloud.clients.arc, arn, clock.now, audience)
    return [_every(clock, "providers.zonalshift", poller.reconcile)]


@dataclass
class _ShiftAudience:
    """NodePools and their NodeClasses' zones from the mirror; Events through the recorder."""

    state: ClusterState
    classes: NodeClasses
    recorder: EventRecorder

    async def pools(self) -> list[zonalshift.PoolView]:
        """Active NodePools with their requirements and their NodeClass's zone ids."""
        out = []
        for pool in self.state.active_nodepools():
            node_class = self.classes.store.get(pool.template.node_class_ref.name)
            subnets = node_class.status.subnets if node_class is not None else ()
            zones = {s.zone_id: s.zone for s in subnets if s.zone_id}
            reqs = from_selector_terms(pool.template.requirements)
            out.append(zonalshift.PoolView(pool.name, reqs, zones))
        return out

    async def publish(self, event: zonalshift.Event) -> None:
        """Post the Event on its NodePool."""
        raw = self.state.nodepools.raw(event.nodepool) or {}
        involved = {
            "apiVersion": NODEPOOLS.api_version,
            "kind": "NodePool",
            "name": event.nodepool,
            "uid": str((raw.get("metadata") or {}).get("uid", "")),
        }
        await self.recorder.publish(involved, event.type, event.reason, event.message)


def _interruptions(
    cloud: AWSCloudProvider,
    interruption: InterruptionController,
    queue: str,
    clock: Clock,
    metrics: Metrics,
) -> Service:
    """The SQS interruption poller, counting messages as upstream's interruption metrics do."""

    async def handle(message: interruption_msg.Message) -> None:
        metrics.interruption_received_messages.labels(message_type=message.kind).inc()
        await interruption.handle(message)
        sent = _event_time(message.time)
        if sent is not None:
            metrics.interruption_message_queue_duration.observe(max(clock.now() - sent, 0.0))
        metrics.interruption_deleted_messages.inc()

    async def run(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        url = await sqs.queue_url(cloud.clients.sqs, queue)
        await sqs.poll_interruptions(
            cloud.clients.sqs,
            url,
            handle,
            interruption.log,
            clock.sleep,
            on_poll=lambda stats: count_malformed(metrics, stats),
        )

    return run


def count_malformed(metrics: Metrics, stats: sqs.PollStats) -> None:
    """Unparseable messages were received and deleted: counted under ``message_type="malformed"``
    (upstream has no kind for them; without a count they vanished from the metrics)."""
    if stats.malformed:
        metrics.interruption_received_messages.labels(message_type="malformed").inc(stats.malformed)
        metrics.interruption_deleted_messages.inc(stats.malformed)


def _event_time(stamp: str) -> float | None:
    """An EventBridge ``time`` (RFC 3339) as unix seconds; None when absent or unreadable."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


async def _second(pair: Awaitable[tuple[Any, float]]) -> float:
    return (await pair)[1]


@dataclass
class _ProfileRefs:
    classes: NodeClasses
    state: ClusterState

    async def referenced_profiles(self) -> set[str]:
        found = {c.status.instance_profile for c in self.classes.store.values()}
        for claim in self.state.nodeclaims.values():
            found.add(claim.annotations.get(awslbl.ANNOTATION_INSTANCE_PROFILE, ""))
        found.discard("")
        return found
