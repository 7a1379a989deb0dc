"""Dry-run authorization checks: can the controller launch with this NodeClass at all?

Upstream's validation dry-runs the launch calls with the NodeClass's resolved resources and
turns ``UnauthorizedOperation`` into ``ValidationSucceeded=False`` with reason
``<Op>AuthCheckFailed``; ``DryRunOperation`` means allowed. Here: CreateLaunchTemplate and
RunInstances (per subnet, any subnet that passes is enough). ``DISABLE_DRY_RUN`` skips them.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from karpenter.cloud.aws import errors
from karpenter.cloud.aws.clients import Client
from karpenter.core.aws import nodeclass as nc

DENIED = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})
FALLBACK_TYPES = {"amd64": "m5.large", "arm64": "m6g.large"}


def _message(err: BaseException) -> str:
    response: Any = getattr(err, "response", {})
    return str(response.get("Error", {}).get("Message", err))


async def _dry_run(op: str, call: Callable[[], Awaitable[object]]) -> nc.Condition | None:
    """None when allowed; a failed ValidationSucceeded condition when denied."""
    try:
        await call()
    except Exception as err:
        code = errors.code(err)
        if code == "DryRunOperation":
            return None
        if code in DENIED:
            return nc.Condition(
                nc.COND_VALIDATION,
                "False",
                f"{op}AuthCheckFailed",
                f"Controller isn't authorized to call ec2:{op}: {_message(err)}",
            )
        raise
    return None


def _arch(ami: nc.AMI) -> str:
    for key, _, values in ami.requirements:
        if key == "kubernetes.io/arch" and values:
            return values[0]
    return "amd64"


async def check(ec2: Client, status: nc.Status) -> nc.Condition | None:
    """Dry-run the launch calls with the resolved status; the first denial, or None."""
    ami = status.amis[0]
    groups = [g.id for g in status.security_groups]
    denied = await _dry_run(
        "CreateLaunchTemplate",
        lambda: ec2.create_launch_template(
            DryRun=True,
            LaunchTemplateName="karpenter.k8s.aws/auth-check",
            LaunchTemplateData={"ImageId": ami.id, "SecurityGroupIds": groups},
        ),
    )
    if denied is not None:
        return denied
    run_denials = []
    for subnet in status.subnets:
        kw: dict[str, Any] = {
            "DryRun": True,
            "ImageId": ami.id,
            "InstanceType": FALLBACK_TYPES.get(_arch(ami), "m5.large"),
            "MinCount": 1,
            "MaxCount": 1,
            "SubnetId": subnet.id,
            "SecurityGroupIds": groups,
        }
        if status.instance_profile:
            kw["IamInstanceProfile"] = {"Name": status.instance_profile}
        result = await _dry_run("RunInstances", functools.partial(ec2.run_instances, **kw))
        if result is None:
            return None  # one subnet that may launch is enough
        run_denials.append(result)
    return run_denials[0] if run_denials else None
