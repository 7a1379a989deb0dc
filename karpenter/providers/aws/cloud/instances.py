"""EC2 instances: typed view of DescribeInstances, batched describe/terminate, tagged listing.

Describe and terminate calls are batched as upstream (100ms idle, 1s max, 500 ids); ids a
batch does not return are NotFound for their caller. ``list_tagged`` finds every instance
Karpenter launched for this cluster (the garbage collector's input).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from karpenter.cloud.provider import NodeClaimNotFoundError
from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud.batching import Batcher
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.cloud.fleet import Launched
from karpenter.providers.aws.core import tags as awstags

LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


@dataclass(frozen=True, slots=True)
class Instance:
    """What Karpenter needs to know about one instance."""

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    image_id: str
    subnet_id: str
    security_group_ids: frozenset[str]
    state: str
    launch_time: float
    tags: Mapping[str, str] = field(default_factory=dict)
    partition: int | None = None  # Placement.PartitionNumber (partition placement groups)
    reservation_id: str = ""  # the capacity reservation it was launched into

    @property
    def provider_id(self) -> str:
        """``aws:///<zone>/<id>``."""
        return awstags.provider_id(self.zone, self.id)


def from_describe(raw: Mapping[str, object]) -> Instance:
    """Read one DescribeInstances instance."""
    placement = raw.get("Placement")
    zone = str(placement.get("AvailabilityZone", "")) if isinstance(placement, Mapping) else ""
    spot = raw.get("InstanceLifecycle") == "spot" or bool(raw.get("SpotInstanceRequestId"))
    rid = _targeted_reservation(raw)
    groups = raw.get("SecurityGroups")
    state = raw.get("State")
    launched = raw.get("LaunchTime")
    tag_list = raw.get("Tags")
    number = placement.get("PartitionNumber") if isinstance(placement, Mapping) else None
    return Instance(
        id=str(raw["InstanceId"]),
        instance_type=str(raw.get("InstanceType", "")),
        zone=zone,
        capacity_type="spot" if spot else "reserved" if rid else "on-demand",
        image_id=str(raw.get("ImageId", "")),
        subnet_id=str(raw.get("SubnetId", "")),
        security_group_ids=frozenset(
            str(g["GroupId"])
            for g in (groups if isinstance(groups, list) else [])
            if isinstance(g, Mapping)
        ),
        state=str(state.get("Name", "")) if isinstance(state, Mapping) else "",
        launch_time=launched.timestamp() if isinstance(launched, datetime) else 0.0,
        tags={
            str(t["Key"]): str(t["Value"])
            for t in (tag_list if isinstance(tag_list, list) else [])
            if isinstance(t, Mapping)
        },
        partition=number if isinstance(number, int) else None,
        reservation_id=rid,
    )


def _targeted_reservation(raw: Mapping[str, object]) -> str:
    """The reservation an instance was launched into by target (open ODCR matches are not
    Karpenter's: they stay on-demand)."""
    rid = raw.get("CapacityReservationId")
    spec = raw.get("CapacityReservationSpecification")
    pref = spec.get("CapacityReservationPreference") if isinstance(spec, Mapping) else None
    return str(rid) if rid and pref == "capacity-reservations-only" else ""


def from_fleet(launched: Launched, security_groups: frozenset[str], now: float) -> Instance:
    """The launched instance from the CreateFleet answer (DescribeInstances right after a launch
    may not see it yet: EC2 is eventually consistent)."""
    return Instance(
        launched.instance_id,
        launched.instance_type,
        launched.zone,
        "spot" if launched.lifecycle == "spot" else "on-demand",
        launched.image_id,
        launched.subnet_id,
        security_groups,
        "pending",
        now,
    )


class Instances:
    """Batched instance calls for one cluster."""

    def __init__(self, ec2: Client, cluster_name: str) -> None:
        self._ec2 = ec2
        self._cluster = cluster_name
        self.describe_batcher: Batcher[str, Instance] = Batcher(self._describe_many, 0.1, 1.0, 500)
        self.terminate_batcher: Batcher[str, str] = Batcher(self._terminate_many, 0.1, 1.0, 500)

    async def _describe_many(self, ids: Sequence[str]) -> list[Instance | BaseException]:
        unique = sorted(set(ids))
        found: dict[str, Instance] = {}
        try:
            pages = self._ec2.get_paginator("describe_instances").paginate(
                InstanceIds=unique, Filters=[{"Name": "instance-state-name", "Values": LIVE_STATES}]
            )
            async for page in pages:
                for res in page.get("Reservations", []):
                    for raw in res.get("Instances", []):
                        found[raw["InstanceId"]] = from_describe(raw)
        except Exception as err:
            if not errors.is_not_found(err):
                raise
            # one unknown id fails the whole call: describe the rest one by one
            for one in unique:
                found.update(await self._describe_one(one))
        return [found.get(i) or NodeClaimNotFoundError(f"instance {i} not found") for i in ids]

    async def _describe_one(self, instance_id: str) -> dict[str, Instance]:
        try:
            out = await self._ec2.describe_instances(
                InstanceIds=[instance_id],
                Filters=[{"Name": "instance-state-name", "Values": LIVE_STATES}],
            )
        except Exception as err:
            if errors.is_not_found(err):
                return {}
            raise
        return {
            raw["InstanceId"]: from_describe(raw)
            for res in out.get("Reservations", [])
            for raw in res.get("Instances", [])
        }

    async def _terminate_many(self, ids: Sequence[str]) -> list[str | BaseException]:
        unique = sorted(set(ids))
        try:
            out = await self._ec2.terminate_instances(InstanceIds=unique)
        except Exception as err:
            if not errors.is_not_found(err):
                raise
            return [NodeClaimNotFoundError(f"instance {i} not found") for i in ids]
        states = {
            t["InstanceId"]: t["CurrentState"]["Name"] for t in out.get("TerminatingInstances", [])
        }
        return [states.get(i) or NodeClaimNotFoundError(f"instance {i} not found") for i in ids]

    async def get(self, instance_id: str) -> Instance:
        """One instance (batched); NodeClaimNotFoundError when it is gone."""
        return await self.describe_batcher.submit(instance_id)

    async def terminate(self, instance_id: str) -> str:
        """Terminate (batched); returns the new state."""
        return await self.terminate_batcher.submit(instance_id)

    async def list_tagged(self) -> list[Instance]:
        """Live instances carrying this cluster's Karpenter tags."""
        pages = self._ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "tag-key", "Values": [awstags.NODEPOOL]},
                {"Name": "tag-key", "Values": [awstags.NODECLASS]},
                {"Name": f"tag:{awstags.EKS_CLUSTER_NAME}", "Values": [self._cluster]},
                {"Name": "instance-state-name", "Values": LIVE_STATES},
            ]
        )
        out: list[Instance] = []
        async for page in pages:
            for res in page.get("Reservations", []):
                out.extend(from_describe(raw) for raw in res.get("Instances", []))
        return sorted(out, key=lambda i: i.id)
