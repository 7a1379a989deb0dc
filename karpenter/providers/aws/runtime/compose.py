"""The AWS composition: the provider, its EC2NodeClass mirror and its controllers, on kube state.

``open_aws`` reads the kube-dns address, opens the provider (``cloud.factory``) and binds
the AWS controllers, which are written against small Protocols, to the real cluster:
EC2NodeClasses come from their own informer-fed store; NodeClaims and Nodes from the
operator's mirror; writes go through the kube client. It yields the ``Plugin`` the operator
runs: the cloud, the core options with AWS's reservation labels, the EC2NodeClass informer,
and the controllers that act only on the leader (NodeClass status and finalizer, interruption
queue, instance health, instance tagging after registration, instance and instance-profile
garbage collection, price and instance-type refresh, offering metrics).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp

from karpenter.cloud.plugin import Host, Plugin, Service
from karpenter.core.model.cluster import Options
from karpenter.kube import errors
from karpenter.kube.client import (
    SERVICES,
    KubeClient,
)
from karpenter.observability.logging import get_logger
from karpenter.providers.aws.cloud import factory, provider_metrics
from karpenter.providers.aws.cloud.factory import open_provider
from karpenter.providers.aws.cloud.provider import AWSCloudProvider
from karpenter.providers.aws.controllers.capacity_blocks import CapacityBlockExpiration
from karpenter.providers.aws.controllers.capacity_type import CapacityTypeSync
from karpenter.providers.aws.controllers.gc import GarbageCollector
from karpenter.providers.aws.controllers.health import HealthController
from karpenter.providers.aws.controllers.interruption import InterruptionController
from karpenter.providers.aws.controllers.nodeclass import NodeClassController
from karpenter.providers.aws.controllers.profile_gc import ProfileCollector
from karpenter.providers.aws.controllers.refresh import Refresher
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.runtime import claims as claims_mod
from karpenter.providers.aws.runtime import nodeclasses as classes_mod
from karpenter.providers.aws.runtime import services as svc
from karpenter.providers.aws.settings import AWSSettings
from karpenter.settings import Settings

_KUBE_ERRORS = (errors.ApiError, aiohttp.ClientError, OSError)


def core_options(settings: Settings) -> Options:
    """The core's options plus AWS's reservation labels (the core takes them as data)."""
    return replace(
        settings.core_options(),
        reservation_id_label=rsv.ID_LABEL,
        reservation_labels=frozenset(rsv.LABELS),
    )


@contextlib.asynccontextmanager
async def open_aws(
    host: Host,
    settings: AWSSettings,
    *,
    endpoint_url: str | None = None,
    session: Any = None,
) -> AsyncIterator[Plugin]:
    """The AWS provider and its controllers bound to this cluster's state (the host's
    MIN_VALUES_POLICY and ReservedCapacity feature gate apply)."""
    classes = classes_mod.NodeClasses(host.kube, host.clock)
    claims = claims_mod.ClaimsView(host.kube, host.state)
    async with open_provider(
        settings,
        classes,
        host.clock.now,
        endpoint_url=endpoint_url,
        session=session,
        cluster_dns=await kube_dns_ip(host.kube),
        min_values_best_effort=host.settings.MIN_VALUES_POLICY == "BestEffort",
    ) as cloud:
        leader_services = await _leader_services(host, settings, cloud, classes, claims)
        yield Plugin(
            cloud,
            core_options(host.settings),
            informers=[(classes_mod.EC2NODECLASSES, classes.store)],
            leader_services=leader_services,
            node_class_generation=classes.generation,
        )


async def _leader_services(
    host: Host,
    settings: AWSSettings,
    cloud: AWSCloudProvider,
    classes: classes_mod.NodeClasses,
    claims: claims_mod.ClaimsView,
) -> list[Service]:
    """The AWS controllers, each bound to the cluster and run as a service on the leader."""
    clock, now = host.clock, host.clock.now
    # AMI aliases resolve through SSM paths named after the cluster's Kubernetes version
    # (EKS's own when EKS_CONTROL_PLANE is set, else the apiserver's).
    version = cloud.eks_version or await host.kube.server_version()
    resolver = factory.resolver(cloud, version, host.settings.feature_gates["ReservedCapacity"])
    nodeclass = NodeClassController(
        classes,
        claims,
        resolver,
        cloud.launch_templates,
        now,
        settings.ISOLATED_VPC,
        hashes=claims,
        ca_bundle=cloud.settings.CLUSTER_CA_BUNDLE,
    )
    gc = GarbageCollector(cloud, claims, now)
    health = HealthController(cloud.clients.ec2, claims, now)
    refresher = Refresher(cloud, now, settings.ISOLATED_VPC)
    blocks = CapacityBlockExpiration(claims, classes, now)
    demotion = CapacityTypeSync(claims, cloud)
    events = claims_mod.ClaimEvents(host.recorder, host.state.nodeclaims)
    provider_metrics.attach(cloud, host.metrics, get_logger("aws").bind(controller="metrics"))
    services: list[Service] = [
        svc.nodeclass_loop(classes, nodeclass),
        events.run,
        svc.every(clock, "instance.garbagecollection", lambda: svc.second(gc.reconcile())),
        svc.every(clock, "interruption.instancestatus", lambda: svc.second(health.reconcile())),
        svc.every(clock, "nodeclaim.tagging", lambda: claims.tag_all(cloud)),
        svc.every(clock, "nodeclaim.partition", lambda: claims.label_partitions(cloud)),
        svc.every(clock, "providers.pricing", refresher.prices),
        svc.every(clock, "providers.instancetype", refresher.instance_types),
        svc.every(clock, "metrics.offerings", svc.offerings(classes, cloud, host.metrics)),
        svc.every(clock, "capacityreservation.expiration", blocks.reconcile),
        svc.every(clock, "capacityreservation.capacitytype", demotion.reconcile),
    ]
    services.extend(await _optional_services(host, settings, cloud, classes, claims, events))
    return services


async def _optional_services(
    host: Host,
    settings: AWSSettings,
    cloud: AWSCloudProvider,
    classes: classes_mod.NodeClasses,
    claims: claims_mod.ClaimsView,
    events: claims_mod.ClaimEvents,
) -> list[Service]:
    """Profile GC (not in an isolated VPC), zonal shift and the interruption queue, as set."""
    clock, out = host.clock, []
    if not settings.ISOLATED_VPC:
        profiles = ProfileCollector(
            cloud.clients.iam,
            settings.AWS_REGION,
            settings.CLUSTER_NAME,
            classes_mod.ProfileRefs(classes, host.state),
            clock.now,
        )
        out.append(
            svc.every(
                clock, "instanceprofile.garbagecollection", lambda: svc.second(profiles.reconcile())
            )
        )
    if settings.ENABLE_ZONAL_SHIFT:
        audience = classes_mod.ShiftAudience(host.state, classes, host.recorder)
        out.extend(await svc.zonal_shift(cloud, clock, audience))
    if settings.INTERRUPTION_QUEUE:
        interruption = InterruptionController(
            claims,
            cloud.unavailable,
            clock.now,
            events,
            reservations=cloud.reservation_availability,
        )
        out.append(
            svc.interruptions(cloud, interruption, settings.INTERRUPTION_QUEUE, clock, host.metrics)
        )
    return out


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
