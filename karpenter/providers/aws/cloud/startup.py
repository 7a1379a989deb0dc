"""Before the AWS provider starts: which region, and can EC2 be reached at all.

The region comes from ``AWS_REGION``, then the SDK's ``AWS_DEFAULT_REGION``, then the instance
metadata service (IMDSv2 token first, IMDSv1 if the token is refused), as upstream finds it on
an EC2 node; no silent default, because a controller launching into the wrong region is worse
than one that does not start. ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` moves IMDS, as it does for
the SDK. The connectivity check is upstream's: a dry-run DescribeInstanceTypes that must come
back as ``DryRunOperation`` (or succeed), so bad credentials, a missing VPC endpoint or a wrong
region stop the process at once with the cause named, not minutes later in a launch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import aiohttp

from karpenter.cloud.plugin import ProviderStartupError
from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud.clients import Client

IMDS_ENDPOINT = "http://169.254.169.254"
_TIMEOUT = aiohttp.ClientTimeout(total=2.0)


class StartupError(ProviderStartupError):
    """The provider cannot start; the message names the setting or the failing call."""


async def imds_region(endpoint: str = "") -> str:
    """The region the instance metadata service reports ("" when it does not answer)."""
    configured = endpoint or os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "")
    base = (configured or IMDS_ENDPOINT).rstrip("/")
    headers: dict[str, str] = {}
    try:
        async with aiohttp.ClientSession(timeout=_TIMEOUT) as http:
            async with http.put(
                f"{base}/latest/api/token",
                headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
            ) as resp:
                if resp.status == 200:
                    headers["X-aws-ec2-metadata-token"] = await resp.text()
            async with http.get(
                f"{base}/latest/meta-data/placement/region", headers=headers
            ) as resp:
                return (await resp.text()).strip() if resp.status == 200 else ""
    except (aiohttp.ClientError, TimeoutError, OSError):
        return ""


async def region(configured: str, env: Mapping[str, str] | None = None) -> str:
    """``configured`` (AWS_REGION), else AWS_DEFAULT_REGION, else IMDS; StartupError if none."""
    env = os.environ if env is None else env
    found = configured or env.get("AWS_DEFAULT_REGION", "") or await imds_region()
    if not found:
        raise StartupError(
            "AWS_REGION: not set, AWS_DEFAULT_REGION neither, and the instance metadata "
            "service did not answer; set AWS_REGION (with the chart: controller.env)"
        )
    return found


async def check_ec2(ec2: Client, region_name: str) -> None:
    """Upstream's connectivity check; StartupError naming the cause when EC2 refuses."""
    try:
        await ec2.describe_instance_types(DryRun=True, MaxResults=5)
    except Exception as err:
        code = errors.code(err)
        if code == "DryRunOperation":
            return
        if code == "UnauthorizedOperation":
            raise StartupError(
                "EC2 connectivity check: not authorized to call ec2:DescribeInstanceTypes "
                "(check the controller's IAM role)"
            ) from err
        raise StartupError(f"EC2 connectivity check failed in region {region_name}: {err}") from err
