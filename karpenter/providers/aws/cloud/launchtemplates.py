"""Launch templates: one per distinct content, named by its hash, deleted when unused.

``ensure`` returns the template name for some content, creating it in EC2 the first time
(DescribeLaunchTemplates tells whether it already exists). The cache keeps each name for a
minute after its last use; ``expire`` deletes expired templates in EC2, which is how upstream
garbage-collects them. ``hydrate`` re-reads the cluster's templates after a restart.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import tags as awstags
from karpenter.providers.aws.core.nodeclass import BlockDevice, MetadataOptions

TTL_SECONDS = 60.0
GIB = 2**30


@dataclass(frozen=True, slots=True)
class Content:
    """What goes into one launch template."""

    image_id: str
    user_data: str
    instance_profile: str
    security_group_ids: tuple[str, ...]
    tags: Mapping[str, str]
    block_devices: tuple[BlockDevice, ...]
    metadata: MetadataOptions
    capacity_type: str
    public_ip: bool | None = None
    detailed_monitoring: bool = False
    network_interfaces: tuple[tuple[int, int, str], ...] = ()  # (card, device, type)
    ip_prefix_count: int | None = None
    connection_tracking: tuple[tuple[str, int], ...] = ()  # (EC2 field, seconds)
    ipv6: bool = False  # the cluster's IP family is IPv6 (its kube-dns address is)
    nested_virtualization: str = ""  # CpuOptions.NestedVirtualization; "" leaves it out
    placement: tuple[tuple[str, str | int], ...] = ()  # Placement fields (placement group)
    # a reserved launch targets exactly one reservation; "" with opt_out_of_reservations set
    # keeps on-demand/spot instances out of open ODCRs, whose counts Karpenter tracks
    capacity_reservation_id: str = ""
    capacity_block: bool = False
    opt_out_of_reservations: bool = False

    def data(self) -> dict[str, Any]:
        """The CreateLaunchTemplate ``LaunchTemplateData``."""
        m = self.metadata
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())]
        kinds = ["network-interface"] + (
            ["spot-instances-request"] if self.capacity_type == "spot" else []
        )
        data: dict[str, Any] = {
            "ImageId": self.image_id,
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "IamInstanceProfile": {"Name": self.instance_profile},
            "Monitoring": {"Enabled": self.detailed_monitoring},
            "NetworkInterfaces": self._nics(),
            "MetadataOptions": {
                "HttpEndpoint": m.http_endpoint,
                "HttpProtocolIpv6": m.http_protocol_ipv6,
                "HttpPutResponseHopLimit": m.http_put_response_hop_limit,
                "HttpTokens": m.http_tokens,
                "InstanceMetadataTags": "disabled",
            },
            "TagSpecifications": [{"ResourceType": k, "Tags": tag_list} for k in kinds],
        }
        if self.block_devices:
            data["BlockDeviceMappings"] = [_bdm(b) for b in self.block_devices]
        if self.nested_virtualization:
            data["CpuOptions"] = {"NestedVirtualization": self.nested_virtualization}
        if self.placement:
            data["Placement"] = dict(self.placement)
        data.update(self._reservation())
        return data

    def _reservation(self) -> dict[str, Any]:
        """CapacityReservationSpecification (and the capacity-block market) of the template."""
        if self.capacity_reservation_id:
            out: dict[str, Any] = {
                "CapacityReservationSpecification": {
                    "CapacityReservationPreference": "capacity-reservations-only",
                    "CapacityReservationTarget": {
                        "CapacityReservationId": self.capacity_reservation_id
                    },
                }
            }
            if self.capacity_block:
                out["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
            return out
        if self.opt_out_of_reservations:
            return {"CapacityReservationSpecification": {"CapacityReservationPreference": "none"}}
        return {}

    def _nics(self) -> list[dict[str, Any]]:
        """One NIC per spec.networkInterfaces entry, else the default device-0 ENI.

        efa-only interfaces get no public IP, prefixes or connection tracking (EFA traffic never
        leaves the VPC and is not tracked).
        """
        specs = self.network_interfaces or ((0, 0, "interface"),)
        out = []
        for card, device, kind in specs:
            nic: dict[str, Any] = {
                "NetworkCardIndex": card,
                "DeviceIndex": device,
                "Groups": list(self.security_group_ids),
            }
            if self.network_interfaces:
                nic["InterfaceType"] = kind
            if kind == "interface":
                if self.public_ip is not None and (card, device) == (0, 0):
                    nic["AssociatePublicIpAddress"] = self.public_ip
                nic.update(self._addressing())
                if self.connection_tracking:
                    nic["ConnectionTrackingSpecification"] = dict(self.connection_tracking)
            out.append(nic)
        return out

    def _addressing(self) -> dict[str, Any]:
        """Prefixes and addresses: IPv4 prefixes, or in IPv6 clusters a primary IPv6 address
        (pods and the kubelet need one) with ``ipPrefixCount`` counting IPv6 prefixes."""
        out: dict[str, Any] = {}
        if self.ip_prefix_count is not None:
            out["Ipv6PrefixCount" if self.ipv6 else "Ipv4PrefixCount"] = self.ip_prefix_count
        if self.ipv6:
            out["Ipv6AddressCount"] = 1
            out["PrimaryIpv6"] = True
        return out

    def name(self) -> str:
        """``karpenter.k8s.aws/<hash>`` of the data (tags included, as upstream)."""
        return awstags.launch_template_name(self.data())


def _bdm(b: BlockDevice) -> dict[str, Any]:
    ebs: dict[str, Any] = {
        "VolumeType": b.volume_type,
        "Encrypted": b.encrypted,
        "DeleteOnTermination": b.delete_on_termination,
    }
    if b.volume_size_bytes is not None:
        ebs["VolumeSize"] = -(-b.volume_size_bytes // GIB)
    for key, value in (("Iops", b.iops), ("Throughput", b.throughput)):
        if value is not None:
            ebs[key] = value
    if b.kms_key_id:
        ebs["KmsKeyId"] = b.kms_key_id
    if b.snapshot_id:
        ebs["SnapshotId"] = b.snapshot_id
    return {"DeviceName": b.device_name, "Ebs": ebs}


class LaunchTemplates:
    """The cluster's launch templates (names with their last-use time)."""

    def __init__(self, ec2: Client, cluster_name: str, ttl: float = TTL_SECONDS) -> None:
        self._ec2 = ec2
        self._cluster = cluster_name
        self._ttl = ttl
        self._used: dict[str, float] = {}
        # told the content of each template created in EC2 (user data is rendered only then)
        self.on_create: Callable[[Content], None] | None = None

    @property
    def cached(self) -> tuple[str, ...]:
        """Names currently cached, sorted."""
        return tuple(sorted(self._used))

    async def ensure(self, content: Content, now: float) -> str:
        """The template's name, creating it if EC2 has none by that name."""
        name = content.name()
        if name not in self._used:
            try:
                await self._ec2.describe_launch_templates(LaunchTemplateNames=[name])
            except Exception as err:
                if errors.code(err) not in (
                    errors.LAUNCH_TEMPLATE_NOT_FOUND,
                    "InvalidLaunchTemplateName.NotFound",
                ):
                    raise
                await self._create(name, content)
        self._used[name] = now
        return name

    async def _create(self, name: str, content: Content) -> None:
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(content.tags.items())]
        try:
            await self._ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData=content.data(),
                TagSpecifications=[{"ResourceType": "launch-template", "Tags": tag_list}],
            )
        except Exception as err:
            # a concurrent launch with the same content created it first: same name, same data
            if errors.code(err) != "InvalidLaunchTemplateName.AlreadyExistsException":
                raise
            return
        if self.on_create is not None:
            self.on_create(content)

    def invalidate(self, name: str) -> None:
        """Forget a name without deleting it in EC2 (it was not found on launch)."""
        self._used.pop(name, None)

    async def expire(self, now: float) -> list[str]:
        """Delete templates unused for ``ttl`` in EC2; returns their names."""
        gone = sorted(n for n, t in self._used.items() if now - t >= self._ttl)
        for name in gone:
            del self._used[name]
            try:
                await self._ec2.delete_launch_template(LaunchTemplateName=name)
            except Exception as err:
                if not errors.is_not_found(err) and "NotFound" not in errors.code(err):
                    raise
        return gone

    async def _tagged(self, extra: Mapping[str, str]) -> list[str]:
        filters = [{"Name": f"tag:{awstags.EKS_CLUSTER_NAME}", "Values": [self._cluster]}]
        filters += [{"Name": f"tag:{k}", "Values": [v]} for k, v in extra.items()]
        out = await self._ec2.describe_launch_templates(Filters=filters)
        return sorted(str(t["LaunchTemplateName"]) for t in out.get("LaunchTemplates", []))

    async def hydrate(self, now: float) -> None:
        """Cache every template of this cluster (after a restart), so expiry cleans them up."""
        for name in await self._tagged({}):
            self._used.setdefault(name, now)

    async def delete_for_nodeclass(self, nodeclass: str) -> list[str]:
        """Delete every template of a NodeClass (its finalizer)."""
        names = await self._tagged({awstags.NODECLASS: nodeclass})
        for name in names:
            self._used.pop(name, None)
            await self._ec2.delete_launch_template(LaunchTemplateName=name)
        return names
