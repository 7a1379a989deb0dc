"""Dry-run authorization checks: can the controller launch with this NodeClass at all?

Upstream's validation dry-runs the three launch calls with the NodeClass's resolved resources
and tags, in its order: CreateFleet (on-demand, every subnet as an override), then
CreateLaunchTemplate, then RunInstances (per subnet; any subnet that passes is enough). The
first ``UnauthorizedOperation`` becomes ``ValidationSucceeded=False`` with reason
``<Op>AuthCheckFailed`` and upstream's fixed message; ``DryRunOperation`` means allowed.

Outcomes are cached for 30 minutes per NodeClass and launch inputs (resolved status, metadata
options, volumes, tags), failures included: IAM changes are rare, and re-running three dry runs
on every reconcile would spend the account's EC2 request budget. Changing any of those inputs
changes the key, so an edited NodeClass is checked again at once. ``DISABLE_DRY_RUN`` skips the
checks entirely (the resolver never calls here).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import nodeclass as nc

FALLBACK_TYPES = {"amd64": "m5.large", "arm64": "m6g.large"}
CHECK_TEMPLATE = "karpenter.k8s.aws/auth-check"  # never created: only named in dry runs
CACHE_TTL_SECONDS = 30 * 60.0


def _message(op: str) -> str:
    return f"Controller isn't authorized to call ec2:{op}"


async def _dry_run(op: str, call: Callable[[], Awaitable[object]]) -> nc.Condition | None:
    """None when allowed; a failed ValidationSucceeded condition when denied."""
    try:
        await call()
    except Exception as err:
        code = errors.code(err)
        if code == errors.DRY_RUN_ALLOWED:
            return None
        if code in errors.UNAUTHORIZED:
            return nc.Condition(nc.COND_VALIDATION, "False", f"{op}AuthCheckFailed", _message(op))
        raise  # throttling and 5xx: the reconcile fails and is retried, nothing is cached
    return None


def _arch(ami: nc.AMI) -> str:
    for key, _, values in ami.requirements:
        if key == "kubernetes.io/arch" and values:
            return values[0]
    return "amd64"


def _tag_specs(kinds: tuple[str, ...], tags: Mapping[str, str]) -> list[dict[str, Any]]:
    tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    return [{"ResourceType": k, "Tags": tag_list} for k in kinds]


async def _create_fleet(ec2: Client, status: nc.Status, tags: Mapping[str, str]) -> object:
    instance_type = FALLBACK_TYPES.get(_arch(status.amis[0]), "m5.large")
    return await ec2.create_fleet(
        DryRun=True,
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
        OnDemandOptions={"AllocationStrategy": "lowest-price"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": CHECK_TEMPLATE,
                    "Version": "$Latest",
                },
                "Overrides": [
                    {"InstanceType": instance_type, "SubnetId": s.id} for s in status.subnets
                ],
            }
        ],
        TagSpecifications=_tag_specs(("instance", "volume", "fleet"), tags),
    )


async def _run_instances(
    ec2: Client, status: nc.Status, tags: Mapping[str, str]
) -> nc.Condition | None:
    ami = status.amis[0]
    denials = []
    for subnet in status.subnets:
        kw: dict[str, Any] = {
            "DryRun": True,
            "ImageId": ami.id,
            "InstanceType": FALLBACK_TYPES.get(_arch(ami), "m5.large"),
            "MinCount": 1,
            "MaxCount": 1,
            "SubnetId": subnet.id,
            "SecurityGroupIds": [g.id for g in status.security_groups],
            "TagSpecifications": _tag_specs(("instance", "volume"), tags),
        }
        if status.instance_profile:
            kw["IamInstanceProfile"] = {"Name": status.instance_profile}
        result = await _dry_run("RunInstances", functools.partial(ec2.run_instances, **kw))
        if result is None:
            return None  # one subnet that may launch is enough
        denials.append(result)
    return denials[0] if denials else None


async def check(
    ec2: Client, status: nc.Status, tags: Mapping[str, str] | None = None
) -> nc.Condition | None:
    """Dry-run the launch calls with the resolved status; the first denial, or None."""
    tags = tags or {}
    denied = await _dry_run("CreateFleet", lambda: _create_fleet(ec2, status, tags))
    if denied is not None:
        return denied
    denied = await _dry_run(
        "CreateLaunchTemplate",
        lambda: ec2.create_launch_template(
            DryRun=True,
            LaunchTemplateName=CHECK_TEMPLATE,
            LaunchTemplateData={
                "ImageId": status.amis[0].id,
                "SecurityGroupIds": [g.id for g in status.security_groups],
            },
            TagSpecifications=_tag_specs(("launch-template",), tags),
        ),
    )
    if denied is not None:
        return denied
    return await _run_instances(ec2, status, tags)


def cache_key(node_class: nc.EC2NodeClass, status: nc.Status, tags: Mapping[str, str]) -> str:
    """``<nodeclass>:<hash of what the dry runs depend on>`` (as upstream keys its cache)."""
    inputs = (
        sorted(repr(s) for s in status.subnets),
        sorted(repr(g) for g in status.security_groups),
        sorted(repr(a) for a in status.amis),
        status.instance_profile,
        repr(node_class.spec.metadata_options),
        sorted(repr(b) for b in node_class.spec.block_device_mappings),
        sorted(tags.items()),
    )
    digest = hashlib.sha256(repr(inputs).encode()).hexdigest()[:16]
    return f"{node_class.name}:{digest}"


class Cache:
    """Dry-run outcomes (None: allowed) by ``cache_key``, each kept for ``ttl`` seconds."""

    def __init__(self, ttl: float = CACHE_TTL_SECONDS) -> None:
        self._ttl = ttl
        self._entries: dict[str, tuple[nc.Condition | None, float]] = {}

    def get(self, key: str, now: float) -> tuple[bool, nc.Condition | None]:
        """``(found, outcome)``; an expired entry is not found."""
        entry = self._entries.get(key)
        if entry is None or entry[1] <= now:
            return False, None
        return True, entry[0]

    def put(self, key: str, outcome: nc.Condition | None, now: float) -> None:
        """Remember an outcome; expired entries are dropped so the map stays bounded."""
        for stale in [k for k, (_, until) in self._entries.items() if until <= now]:
            del self._entries[stale]
        self._entries[key] = (outcome, now + self._ttl)


async def cached_check(
    ec2: Client,
    cache: Cache,
    node_class: nc.EC2NodeClass,
    status: nc.Status,
    tags: Mapping[str, str],
    now: float,
) -> nc.Condition | None:
    """``check``, answered from the cache while an outcome for the same inputs is fresh."""
    key = cache_key(node_class, status, tags)
    found, outcome = cache.get(key, now)
    if found:
        return outcome
    outcome = await check(ec2, status, tags)
    cache.put(key, outcome, now)
    return outcome
