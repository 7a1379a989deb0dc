"""Launch-template content for one launch: user data, volumes, IMDS, network, tags.

Labels are the claim's plus the capacity type (and ``do-not-sync-taints`` except for Custom);
taints are the claim's and its startup taints plus ``karpenter.sh/unregistered:NoExecute``;
max pods is the kubelet's if set, else the instance types' ENI-limited count (templates are
grouped per value, and per resolved kubelet when it holds CEL expressions). A reserved
launch's template targets its one reservation (and carries the capacity-block market for a
block); with reservations selected, other templates opt out of open ODCRs. User data above
EC2's 16 KiB fails the launch with upstream's reason.
The cluster is IPv6 when its kube-dns address is, which gives the primary interface an IPv6
address and makes ``ipPrefixCount`` count IPv6 prefixes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from karpenter.cloud.provider import CreateError
from karpenter.core.model import labels as lbl
from karpenter.core.model.node import NodeClaim
from karpenter.core.scheduling.taints import Taint
from karpenter.providers.aws.cloud import sdkmodel
from karpenter.providers.aws.cloud.launchtemplates import Content
from karpenter.providers.aws.core import amifamily, userdata
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.core.capacity import Kubelet

UNREGISTERED = Taint(lbl.TAINT_UNREGISTERED, "NoExecute")
USER_DATA_LIMIT = 16384  # bytes EC2 accepts, decoded
GIB = 2**30


@dataclass(frozen=True, slots=True)
class Cluster:
    """What nodes need to know to join the cluster."""

    name: str
    endpoint: str
    ca_bundle: str = ""
    cidr: str = ""
    dns: str = ""


@dataclass(frozen=True, slots=True)
class Launch:
    """The per-template choices of one launch."""

    image_id: str
    max_pods: int
    capacity_type: str
    tags: Mapping[str, str]
    placement: tuple[tuple[str, str | int], ...] = ()  # see aws/core/placement.py
    reservation_id: str = ""  # the reservation a reserved launch targets
    reservation_type: str = ""
    # spec.kubelet with its expressions resolved for the template's instance types (None: as is)
    kubelet: Kubelet | None = None


def default_block_devices(family: str) -> tuple[nc.BlockDevice, ...]:
    """Upstream's volumes: 20Gi gp3 root; Bottlerocket 4Gi OS + 20Gi data; Windows 50Gi."""
    if family == amifamily.CUSTOM:
        return ()
    if family == amifamily.BOTTLEROCKET:
        return (nc.BlockDevice("/dev/xvda", 4 * GIB), nc.BlockDevice("/dev/xvdb", 20 * GIB))
    if family in amifamily.WINDOWS:
        return (nc.BlockDevice("/dev/sda1", 50 * GIB),)
    return (nc.BlockDevice("/dev/xvda", 20 * GIB),)


def user_data(
    cluster: Cluster, claim: NodeClaim, node_class: nc.EC2NodeClass, launch: Launch
) -> str:
    """The rendered user data (raises CreateError above EC2's limit)."""
    family = node_class.resolved_family()
    labels = {**claim.labels, lbl.CAPACITY_TYPE: launch.capacity_type}
    for key in rsv.LABELS:
        labels.pop(key, None)  # the claim may list several reservations; the node is in one
    if launch.reservation_id:
        labels[rsv.ID_LABEL] = launch.reservation_id
        labels[rsv.TYPE_LABEL] = launch.reservation_type or rsv.TYPE_DEFAULT
    if family != amifamily.CUSTOM:
        labels[lbl.DO_NOT_SYNC_TAINTS] = "true"
    taints = (*claim.taints, *claim.startup_taints)
    if UNREGISTERED not in taints:
        taints = (*taints, UNREGISTERED)
    kubelet = launch.kubelet or node_class.spec.kubelet
    opts = userdata.Options(
        cluster.name,
        cluster.endpoint,
        cluster.ca_bundle,
        cluster.cidr,
        kubelet.cluster_dns[0] if kubelet.cluster_dns else cluster.dns,
        # the kubelet may not set node-restriction labels on itself
        {k: v for k, v in labels.items() if "node-restriction.kubernetes.io" not in k},
        taints,
        kubelet.max_pods if kubelet.max_pods is not None else launch.max_pods,
        kubelet,
        node_class.spec.user_data,
        node_class.spec.instance_store_policy == "RAID0",
        node_class.spec.kubelet_raw,
    )
    rendered = userdata.render(family, opts)
    size = len(rendered.encode())
    if size > USER_DATA_LIMIT:
        raise CreateError(
            f"user data is {size} bytes, EC2 allows {USER_DATA_LIMIT}", "UserDataSizeLimitExceeded"
        )
    return rendered


def content(
    cluster: Cluster, claim: NodeClaim, node_class: nc.EC2NodeClass, launch: Launch
) -> Content:
    """Everything one launch template holds."""
    spec = node_class.spec
    return Content(
        image_id=launch.image_id,
        user_data=user_data(cluster, claim, node_class, launch),
        instance_profile=node_class.status.instance_profile,
        security_group_ids=tuple(g.id for g in node_class.status.security_groups),
        tags=launch.tags,
        block_devices=spec.block_device_mappings
        or default_block_devices(node_class.resolved_family()),
        metadata=spec.metadata_options,
        capacity_type=launch.capacity_type,
        public_ip=spec.associate_public_ip_address,
        detailed_monitoring=spec.detailed_monitoring,
        network_interfaces=tuple(
            (n.network_card_index, n.device_index, n.interface_type)
            for n in spec.network_interfaces
        ),
        ip_prefix_count=spec.ip_prefix_count,
        connection_tracking=_conntrack(spec.connection_tracking),
        ipv6=_is_ipv6(cluster.dns),
        # unsent when the SDK cannot express it (sdkmodel); types are still filtered for it
        nested_virtualization=spec.nested_virtualization
        if sdkmodel.nested_virtualization()
        else "",
        placement=launch.placement,
        capacity_reservation_id=launch.reservation_id,
        capacity_block=launch.reservation_type == rsv.TYPE_CAPACITY_BLOCK,
        opt_out_of_reservations=bool(spec.capacity_reservation_selector_terms)
        and not launch.reservation_id,
    )


def _is_ipv6(address: str) -> bool:
    """Upstream's cluster IP family test: the kube-dns Service address is IPv6."""
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


def _conntrack(ct: nc.ConnectionTracking | None) -> tuple[tuple[str, int], ...]:
    if ct is None:
        return ()
    pairs = (
        ("TcpEstablishedTimeout", ct.tcp_established_timeout),
        ("UdpStreamTimeout", ct.udp_stream_timeout),
        ("UdpTimeout", ct.udp_timeout),
    )
    return tuple((k, v) for k, v in pairs if v is not None)
