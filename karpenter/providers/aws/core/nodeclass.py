"""The EC2NodeClass as the provider sees it: spec fields it launches with, resolved status.

``aws/api/ec2nodeclass.py`` validates the manifest and converts it to these values; the NodeClass
controller fills ``Status`` from EC2/SSM/IAM; the provider reads both to launch. Conditions
and reasons are upstream's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter.providers.aws.core import amifamily, reservations
from karpenter.providers.aws.core.capacity import Kubelet

COND_READY = "Ready"
COND_AMIS = "AMIsReady"
COND_SUBNETS = "SubnetsReady"
COND_SECURITY_GROUPS = "SecurityGroupsReady"
COND_INSTANCE_PROFILE = "InstanceProfileReady"
COND_VALIDATION = "ValidationSucceeded"
COND_PLACEMENT_GROUP = "PlacementGroupReady"
COND_CAPACITY_RESERVATIONS = "CapacityReservationsReady"
CONDITIONS = (
    COND_AMIS,
    COND_SUBNETS,
    COND_SECURITY_GROUPS,
    COND_INSTANCE_PROFILE,
    COND_PLACEMENT_GROUP,
    COND_VALIDATION,
)


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One subnet / security-group / AMI selector term (fields a kind does not use stay empty)."""

    tags: Mapping[str, str] = field(default_factory=dict)
    id: str = ""
    name: str = ""
    owner: str = ""
    alias: str = ""
    ssm_parameter: str = ""


@dataclass(frozen=True, slots=True)
class BlockDevice:
    """A ``blockDeviceMappings`` entry (EBS only), size in bytes."""

    device_name: str
    volume_size_bytes: int | None = None
    volume_type: str = "gp3"
    encrypted: bool = True
    delete_on_termination: bool = True
    iops: int | None = None
    throughput: int | None = None
    kms_key_id: str = ""
    snapshot_id: str = ""
    root_volume: bool = False


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    """IMDS options; the CRD default."""

    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = "disabled"
    http_put_response_hop_limit: int = 1
    http_tokens: str = "required"


@dataclass(frozen=True, slots=True)
class NetworkInterface:
    """A ``networkInterfaces`` entry."""

    network_card_index: int
    device_index: int
    interface_type: str = "interface"  # or efa-only


@dataclass(frozen=True, slots=True)
class ConnectionTracking:
    """``connectionTracking`` timeouts in seconds (None: EC2's default)."""

    tcp_established_timeout: int | None = None
    udp_stream_timeout: int | None = None
    udp_timeout: int | None = None


@dataclass(frozen=True, slots=True)
class Spec:
    """The spec fields the provider uses."""

    subnet_selector_terms: tuple[SelectorTerm, ...] = ()
    security_group_selector_terms: tuple[SelectorTerm, ...] = ()
    ami_selector_terms: tuple[SelectorTerm, ...] = ()
    ami_family: str = ""
    role: str = ""
    instance_profile: str = ""
    user_data: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    kubelet: Kubelet = field(default_factory=Kubelet)
    kubelet_raw: Mapping[str, object] = field(default_factory=dict)
    block_device_mappings: tuple[BlockDevice, ...] = ()
    instance_store_policy: str = ""
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    associate_public_ip_address: bool | None = None
    detailed_monitoring: bool = False
    context: str = ""
    network_interfaces: tuple[NetworkInterface, ...] = ()
    ip_prefix_count: int | None = None
    connection_tracking: ConnectionTracking | None = None
    nested_virtualization: str = ""  # cpuOptions.nestedVirtualization: enabled | disabled | unset
    placement_group: SelectorTerm | None = None  # placementGroupSelector: its name or its id
    capacity_reservation_selector_terms: tuple[reservations.SelectorTerm, ...] = ()

    def efa_only_interfaces(self, card: int | None = None) -> int:
        """How many efa-only interfaces (on one network card, or in all)."""
        return sum(
            1
            for n in self.network_interfaces
            if n.interface_type == "efa-only" and (card is None or n.network_card_index == card)
        )


@dataclass(frozen=True, slots=True)
class Subnet:
    """A resolved subnet."""

    id: str
    zone: str
    zone_id: str = ""
    available_ips: int = 0


@dataclass(frozen=True, slots=True)
class SecurityGroup:
    """A resolved security group."""

    id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class AMI:
    """A resolved AMI with the requirements (key, operator, values) it can serve."""

    id: str
    name: str = ""
    deprecated: bool = False
    requirements: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class PlacementGroup:
    """A resolved placement group (``aws/core/placement.py`` says what it changes)."""

    id: str
    name: str
    strategy: str  # cluster | partition | spread
    state: str = "available"
    partition_count: int = 0  # partition groups only
    spread_level: str = ""  # spread groups only: rack | host


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition."""

    type: str
    status: str  # True | False | Unknown
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Status:
    """``status`` of an EC2NodeClass."""

    subnets: tuple[Subnet, ...] = ()
    security_groups: tuple[SecurityGroup, ...] = ()
    amis: tuple[AMI, ...] = ()
    instance_profile: str = ""
    conditions: tuple[Condition, ...] = ()
    placement_groups: tuple[PlacementGroup, ...] = ()  # at most one: the selector's
    capacity_reservations: tuple[reservations.CapacityReservation, ...] = ()

    def placement_group(self) -> PlacementGroup | None:
        """The resolved placement group, if the NodeClass has one."""
        return self.placement_groups[0] if self.placement_groups else None

    def condition(self, kind: str) -> Condition | None:
        """The condition of that type, if set."""
        return next((c for c in self.conditions if c.type == kind), None)

    def ready(self) -> str:
        """``True`` / ``False`` / ``Unknown`` of the root Ready condition."""
        cond = self.condition(COND_READY)
        return cond.status if cond is not None else "Unknown"


@dataclass(frozen=True, slots=True)
class EC2NodeClass:
    """An EC2NodeClass: identity, spec, status."""

    name: str
    spec: Spec = field(default_factory=Spec)
    status: Status = field(default_factory=Status)
    uid: str = ""
    generation: int = 1
    deleting: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)

    def resolved_family(self) -> str:
        """The AMI family: spec.amiFamily, else the alias's family, else AL2023."""
        if self.spec.ami_family:
            return self.spec.ami_family
        for term in self.spec.ami_selector_terms:
            if term.alias:
                return amifamily.parse_alias(term.alias).family
        return amifamily.AL2023


def with_ready(conditions: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """The conditions plus a root Ready that is the conjunction of the others."""
    others = tuple(c for c in conditions if c.type != COND_READY)
    bad = [c for c in others if c.status != "True"]
    if not bad:
        ready = Condition(COND_READY, "True", "Ready", "")
    else:
        first = bad[0]
        status = "False" if any(c.status == "False" for c in bad) else "Unknown"
        ready = Condition(COND_READY, status, first.reason or "NotReady", first.message)
    return (*others, ready)


def static_hash(nc: EC2NodeClass, ca_bundle: str = "") -> str:
    """The drift hash of the static fields (selector terms are excluded: they drift via status).

    Upstream hashes the Go struct with hashstructure; this hashes the same field set as
    canonical JSON, so values differ from upstream's but equal specs hash equal.
    """
    s = nc.spec
    doc = {
        "amiFamily": nc.resolved_family(),
        "role": s.role,
        "instanceProfile": s.instance_profile,
        "userData": s.user_data,
        "tags": dict(sorted(s.tags.items())),
        "kubelet": json.dumps(s.kubelet_raw, sort_keys=True, default=str),
        "blockDeviceMappings": sorted(repr(b) for b in s.block_device_mappings),
        "instanceStorePolicy": s.instance_store_policy,
        "metadataOptions": repr(s.metadata_options),
        "associatePublicIPAddress": s.associate_public_ip_address,
        "detailedMonitoring": s.detailed_monitoring,
        "context": s.context,
        "networkInterfaces": sorted(repr(n) for n in s.network_interfaces),
        "connectionTracking": repr(s.connection_tracking),
        "caBundle": ca_bundle,
    }
    # added only when set, as upstream ignores zero values: classes without cpuOptions keep
    # the hash they had before the field existed, so their claims do not drift
    if s.nested_virtualization:
        doc["cpuOptions"] = s.nested_virtualization
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).digest()
    return str(int.from_bytes(digest[:8], "big"))
