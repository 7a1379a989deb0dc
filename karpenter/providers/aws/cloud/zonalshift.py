"""ARC zonal shift: GetManagedResource on the cluster, read into ``aws/core/zonalshift`` shifts.

The cluster must be registered with ARC (a managed resource) for shifts to exist; upstream
first checked this with a fatal error, its later revisions fall back to "no shifts" when the
cluster is not registered, which ``registered`` lets the caller do.
"""

from __future__ import annotations

from datetime import datetime

from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import zonalshift
from karpenter.providers.aws.core.zonalshift import Shift


def _time(value: object) -> float:
    return value.timestamp() if isinstance(value, datetime) else 0.0


async def poll(arc: Client, cluster_arn: str, now: float) -> list[Shift]:
    """The shifts and autoshifts ARC reports for the cluster now."""
    out = await arc.get_managed_resource(resourceIdentifier=cluster_arn)
    shifts = [
        Shift(
            str(z["awayFrom"]),
            _time(z.get("expiryTime")),
            z.get("appliedStatus") == zonalshift.APPLIED,
        )
        for z in out.get("zonalShifts", [])
    ]
    shifts += [
        zonalshift.autoshift(str(a["awayFrom"]), str(a.get("appliedStatus", "")), now)
        for a in out.get("autoshifts", [])
    ]
    return sorted(shifts, key=lambda s: s.zone_id)


async def registered(arc: Client, cluster_arn: str) -> bool:
    """Is the cluster a resource ARC manages (any error reads as no)?"""
    try:
        await arc.get_managed_resource(resourceIdentifier=cluster_arn)
    except Exception:  # AccessDenied/ResourceNotFound: not registered, or not allowed to ask
        return False
    return True
