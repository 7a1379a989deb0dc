"""AWS error codes: the one place that classifies them.

ClientError (botocore)
├── not found           InvalidInstanceID.NotFound, NoSuchEntity, ParameterNotFound, ...
├── unfulfillable       InsufficientInstanceCapacity, MaxSpotInstanceCountExceeded, ... (ICE)
│   └── spread limit    ... "limit of instances in this spread placement group" (7 per zone)
├── spot SLR missing    AuthFailure.ServiceLinkedRoleCreationNotPermitted
├── dry run            DryRunOperation (allowed), UnauthorizedOperation/AccessDenied (denied)
└── everything else     → a CreateError reason via ``launch_reason``
"""

from __future__ import annotations

from botocore.exceptions import ClientError

NOT_FOUND = frozenset(
    {
        "InvalidCapacityReservationId.NotFound",
        "InvalidInstanceID.NotFound",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "NoSuchEntity",
        "ParameterNotFound",
        # DescribePlacementGroups names an unknown group (by name) / id this way
        "InvalidPlacementGroup.Unknown",
        "InvalidPlacementGroupId.NotFound",
    }
)
UNFULFILLABLE = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
SPOT_SLR = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
SUBNET_FULL = "InsufficientFreeAddressesInSubnet"
# Errors that mean "no capacity here" (the claim fails as InsufficientCapacity, not CreateError)
CAPACITY = UNFULFILLABLE | {SPOT_SLR}
LAUNCH_TEMPLATE_NOT_FOUND = "InvalidLaunchTemplateName.NotFoundException"
# A dry run's two honest answers: the call would have been allowed, or IAM denies it.
DRY_RUN_ALLOWED = "DryRunOperation"
UNAUTHORIZED = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})
_REASONS = (
    (SPOT_SLR, "SpotSLRCreationFailed"),
    ("Not authorized for images", "AMIAuthorizationFailure"),
    ("UnauthorizedOperation", "Unauthorized"),
    ("AccessDenied", "Unauthorized"),
    ("AuthFailure", "Unauthorized"),
    ("belong to different networks", "SecurityGroupSubnetVPCMismatch"),
    ("iamInstanceProfile.name is invalid", "InstanceProfileNameInvalid"),
    ("InvalidLaunchTemplateId.NotFound", "LaunchTemplateNotFound"),
    ("User data is limited", "UserDataSizeLimitExceeded"),
    ("InvalidAMIID.Malformed", "InvalidAMIID"),
    ("InvalidAMIID.NotFound", "AMINotFound"),
    ("RequestLimitExceeded", "RequestLimitExceeded"),
    ("InternalError", "InternalError"),
    ("MaxFleetCountExceeded", "FleetQuotaExceeded"),
    ("PendingVerification", "AccountPendingVerification"),
    ("MaxSpotInstanceCountExceeded", "SpotQuotaExceeded"),
    ("VcpuLimitExceeded", "VCPULimitExceeded"),
    ("InsufficientFreeAddressesInSubnet", "InsufficientFreeAddressesInSubnet"),
)


def code(err: BaseException) -> str:
    """The AWS error code of a ClientError (``""`` for anything else)."""
    if isinstance(err, ClientError):
        return str(err.response.get("Error", {}).get("Code", ""))
    return ""


def is_not_found(err: BaseException) -> bool:
    """True when the error says the resource does not exist."""
    return code(err) in NOT_FOUND


SPREAD_LIMIT_TEXT = "limit of instances in this spread placement group"


def is_spread_limit(error_code: str, message: str) -> bool:
    """A fleet error saying the spread group holds its 7 instances in that zone already.

    EC2 reports it with a capacity code; only the message tells it from a real shortage (as
    upstream reads it), and unlike a shortage it holds for every instance type in the zone.
    """
    return error_code in UNFULFILLABLE and SPREAD_LIMIT_TEXT in message


def launch_reason(text: str) -> str:
    """Upstream's CreateError reason for an error code or message (first substring hit)."""
    for needle, reason in _REASONS:
        if needle in text:
            return reason
    return "LaunchFailed"
