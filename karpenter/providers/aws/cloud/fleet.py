"""CreateFleet: the instant fleet request, its result, and batching of identical requests.

Identical requests within 35ms (at most 1s, 1000 items) become one CreateFleet with
``TotalTargetCapacity=N``; each caller gets one instance id, and the fleet's ``Errors`` go to
every caller (they describe pools, not callers). On-demand uses ``lowest-price``, spot
``price-capacity-optimized``, as upstream; a capacity block's fleet (DefaultTargetCapacityType
``capacity-block``) names no strategy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter.providers.aws.cloud.batching import Batcher
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core.launch import Override


@dataclass(frozen=True, slots=True)
class FleetError:
    """One ``Errors[]`` entry: the pool that failed and why."""

    instance_type: str
    zone: str
    subnet_id: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Launched:
    """One instance as CreateFleet reports it (no DescribeInstances needed, as upstream)."""

    instance_id: str
    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    lifecycle: str


@dataclass(frozen=True, slots=True)
class FleetResult:
    """What one caller got: at most one instance, and the fleet's errors."""

    instance: Launched | None
    errors: tuple[FleetError, ...]

    @property
    def instance_id(self) -> str:
        """The launched instance's id (``""`` when none)."""
        return self.instance.instance_id if self.instance else ""


def request(
    capacity_type: str,
    groups: Sequence[tuple[str, Sequence[Override]]],
    tags: Mapping[str, str],
    context: str = "",
) -> dict[str, Any]:
    """The CreateFleet input for one instance: one config per launch template."""
    tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    req: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {
            "DefaultTargetCapacityType": capacity_type,
            "TotalTargetCapacity": 1,
        },
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": [
                    {
                        "InstanceType": o.instance_type,
                        "SubnetId": o.subnet_id,
                        "AvailabilityZone": o.zone,
                        "ImageId": o.image_id,
                        "Priority": o.price,
                    }
                    for o in overrides
                ],
            }
            for name, overrides in groups
        ],
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": tag_list} for kind in ("instance", "volume", "fleet")
        ],
    }
    if capacity_type == "spot":
        req["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    elif capacity_type == "on-demand":
        req["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    # capacity-block fleets take neither: the block decides what launches
    if context:
        req["Context"] = context
    return req


def _errors(out: Mapping[str, Any]) -> tuple[FleetError, ...]:
    found = []
    for err in out.get("Errors", []):
        over = err.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        found.append(
            FleetError(
                str(over.get("InstanceType", "")),
                str(over.get("AvailabilityZone", "")),
                str(over.get("SubnetId", "")),
                str(err.get("ErrorCode", "")),
                str(err.get("ErrorMessage", "")),
            )
        )
    return tuple(found)


def _instances(out: Mapping[str, Any]) -> list[Launched]:
    found = []
    for inst in out.get("Instances", []):
        over = inst.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        for instance_id in inst.get("InstanceIds", []):
            found.append(
                Launched(
                    str(instance_id),
                    str(inst.get("InstanceType") or over.get("InstanceType", "")),
                    str(over.get("AvailabilityZone", "")),
                    str(over.get("SubnetId", "")),
                    str(over.get("ImageId", "")),
                    str(inst.get("Lifecycle", "on-demand")),
                )
            )
    return found


class Fleets:
    """Batched CreateFleet calls."""

    def __init__(self, ec2: Client) -> None:
        self._ec2 = ec2
        self.batcher: Batcher[dict[str, Any], FleetResult] = Batcher(
            self._create_many, 0.035, 1.0, 1000, key=lambda r: json.dumps(r, sort_keys=True)
        )
        self.calls = 0

    async def _create_many(
        self, reqs: Sequence[dict[str, Any]]
    ) -> list[FleetResult | BaseException]:
        req = copy.deepcopy(reqs[0])
        req["TargetCapacitySpecification"]["TotalTargetCapacity"] = len(reqs)
        self.calls += 1
        out = await self._ec2.create_fleet(**req)
        launched = _instances(out)
        errs = _errors(out)
        if len(launched) < len(reqs) and not errs:
            errs = (FleetError("", "", "", "UnfulfillableCapacity", "too few instances returned"),)
        return [
            FleetResult(launched[n] if n < len(launched) else None, errs) for n in range(len(reqs))
        ]

    async def create(self, req: dict[str, Any]) -> FleetResult:
        """Launch one instance (merged with identical concurrent requests)."""
        return await self.batcher.submit(req)
