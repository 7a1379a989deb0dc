"""Cloud-side drift: does a launched instance still match its EC2NodeClass?

Checked in upstream's order, first hit wins: the NodeClass static hash (same hash version
only), the AMI the status would now pick for the type, the security groups, the subnet, the
placement group (the claim's ``placement-group-id`` label against the resolved group, ``""``
on both sides meaning none); capacity reservation (launched into one the NodeClass no longer
selects).
Requirement and NodePool drift are the core's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import placement
from karpenter.providers.aws.core.nodeclass import AMI, Status

NODECLASS_DRIFT = "NodeClassDrift"
AMI_DRIFT = "AMIDrift"
SECURITY_GROUP_DRIFT = "SecurityGroupDrift"
SUBNET_DRIFT = "SubnetDrift"
PLACEMENT_GROUP_DRIFT = "PlacementGroupDrift"
CAPACITY_RESERVATION_DRIFT = "CapacityReservationDrift"


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """What EC2 says about the claim's instance."""

    image_id: str
    subnet_id: str
    security_group_ids: frozenset[str]
    reservation_id: str = ""


def hash_drifted(
    claim_annotations: Mapping[str, str], class_annotations: Mapping[str, str]
) -> bool:
    """Both carry hash and version, versions equal, hashes differ."""
    keys = (awslbl.ANNOTATION_NODECLASS_HASH, awslbl.ANNOTATION_NODECLASS_HASH_VERSION)
    if not all(k in claim_annotations and k in class_annotations for k in keys):
        return False
    version = awslbl.ANNOTATION_NODECLASS_HASH_VERSION
    if claim_annotations[version] != class_annotations[version]:
        return False
    return claim_annotations[keys[0]] != class_annotations[keys[0]]


def drift_reason(
    facts: InstanceFacts,
    status: Status,
    expected_ami: AMI | None,
    claim_annotations: Mapping[str, str],
    class_annotations: Mapping[str, str],
    claim_labels: Mapping[str, str] | None = None,
) -> str:
    """The first drift reason, or ``""``. ``expected_ami``: the AMI status picks for the type.

    Placement-group drift is checked only when the claim's labels are given.
    """
    if hash_drifted(claim_annotations, class_annotations):
        return NODECLASS_DRIFT
    if status.amis and (expected_ami is None or expected_ami.id != facts.image_id):
        return AMI_DRIFT
    if status.security_groups and facts.security_group_ids != {
        g.id for g in status.security_groups
    }:
        return SECURITY_GROUP_DRIFT
    if status.subnets and facts.subnet_id not in {s.id for s in status.subnets}:
        return SUBNET_DRIFT
    if claim_labels is not None and placement_drifted(claim_labels, status):
        return PLACEMENT_GROUP_DRIFT
    if facts.reservation_id and facts.reservation_id not in {
        r.id for r in status.capacity_reservations
    }:
        return CAPACITY_RESERVATION_DRIFT
    return ""


def placement_drifted(claim_labels: Mapping[str, str], status: Status) -> bool:
    """The claim was launched into another placement group than the class now resolves to
    (or into one while the class has none, or outside one while it has one)."""
    group = status.placement_group()
    return claim_labels.get(placement.LABEL_ID, "") != (group.id if group else "")
