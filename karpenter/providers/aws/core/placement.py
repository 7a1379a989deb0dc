"""EC2 placement groups: what a resolved group changes about readiness, offerings and launches.

A NodeClass names at most one placement group (``spec.placementGroupSelector``, by name or by
id). Once resolved it is in ``status.placementGroups`` and it shapes everything downstream:

- ``PlacementGroupReady`` (upstream's reasons: ``PlacementGroupResolutionFailed``,
  ``PlacementGroupNotFound``, ``PlacementGroupNotAvailable``; True when no selector is set).
- Instance types: those whose ``PlacementGroupInfo.SupportedStrategies`` omit the group's
  strategy get no available offering (e.g. flex and older generations cannot join a cluster
  group). Every type carries ``placement-group-id In [<id>]`` and, for a partition group,
  ``placement-group-partition In [1..N]`` so pods can select a partition.
- Insufficient capacity inside a group is remembered under ``<capacity>:<type>:<zone>:<pg>``
  (``...:<pg>:<partition>`` when the launch pinned a partition): a full group hides the pool
  for this group only, never for NodeClasses outside it.
- Launch templates carry ``Placement.GroupId`` (and ``PartitionNumber`` when the claim pins
  exactly one partition; otherwise EC2 picks one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from karpenter.core.model.instancetype import InstanceType
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.unavailable import UnavailableOfferings

LABEL_ID = f"{awslbl.GROUP}/placement-group-id"
LABEL_PARTITION = f"{awslbl.GROUP}/placement-group-partition"
LABELS = (LABEL_ID, LABEL_PARTITION)

CLUSTER = "cluster"
PARTITION = "partition"
SPREAD = "spread"
AVAILABLE = "available"

RESOLUTION_FAILED = "PlacementGroupResolutionFailed"
NOT_FOUND = "PlacementGroupNotFound"
NOT_AVAILABLE = "PlacementGroupNotAvailable"


def selector_text(selector: nc.SelectorTerm) -> str:
    """How messages name the selector: its name, else its id."""
    return selector.name or selector.id


def condition(
    selector: nc.SelectorTerm | None, found: nc.PlacementGroup | None, error: str = ""
) -> nc.Condition:
    """``PlacementGroupReady`` for a resolution outcome (``error``: why the lookup failed)."""
    kind = nc.COND_PLACEMENT_GROUP
    if selector is None:
        return nc.Condition(kind, "True", kind)
    text = selector_text(selector)
    if error:
        msg = f"Failed to resolve placement group {_quote(text)}: {error}"
        return nc.Condition(kind, "False", RESOLUTION_FAILED, msg)
    if found is None:
        return nc.Condition(kind, "False", NOT_FOUND, f"Placement group {_quote(text)} not found")
    if found.state != AVAILABLE:
        msg = (
            f"Placement group {_quote(text)} is in state {_quote(found.state)}, "
            f"expected {_quote(AVAILABLE)}"
        )
        return nc.Condition(kind, "False", NOT_AVAILABLE, msg)
    return nc.Condition(kind, "True", kind)


def _quote(text: str) -> str:
    # Go's %q, which upstream's messages use; selectors and states never hold quotes
    return f'"{text}"'


def supports(info: InstanceTypeInfo, group: nc.PlacementGroup | None) -> bool:
    """Can the type launch into the group? Types that list no strategies are left to EC2."""
    if group is None or not info.placement_strategies:
        return True
    return group.strategy in info.placement_strategies


def requirements(group: nc.PlacementGroup | None) -> list[Requirement]:
    """The group's labels as instance-type requirements (none without a group)."""
    if group is None:
        return []
    reqs = [Requirement.new(LABEL_ID, "In", [group.id])]
    if group.strategy == PARTITION and group.partition_count > 0:
        partitions = [str(p) for p in range(1, group.partition_count + 1)]
        reqs.append(Requirement.new(LABEL_PARTITION, "In", partitions))
    return reqs


def pinned_partition(group: nc.PlacementGroup | None, reqs: Requirements) -> int | None:
    """The one partition a claim's requirements allow, if it allows exactly one."""
    if group is None or group.strategy != PARTITION or LABEL_PARTITION not in reqs:
        return None
    allowed = reqs[LABEL_PARTITION]
    if allowed.complement or len(allowed.values) != 1:
        return None
    value = next(iter(allowed.values))
    return int(value) if value.isdigit() and 1 <= int(value) <= group.partition_count else None


def ice_scope(group: nc.PlacementGroup | None, partition: int | None = None) -> str:
    """The unavailable-offerings key suffix for launches into the group (``""``: none)."""
    if group is None:
        return ""
    return group.id if partition is None else f"{group.id}:{partition}"


def hide_partition_ice(
    types: Iterable[InstanceType], unavailable: UnavailableOfferings, scope: str, now: float
) -> tuple[InstanceType, ...]:
    """Types with the offerings that ran out in one partition marked unavailable.

    The catalogue is per NodeClass and cannot know which partition a claim pins, so the
    partition-level memory is applied per launch.
    """
    out = []
    for it in types:
        offers = tuple(
            replace(o, available=False)
            if o.available
            and unavailable.is_unavailable(o.capacity_type, it.name, o.zone, now, scope)
            else o
            for o in it.offerings
        )
        out.append(it if offers == it.offerings else replace(it, offerings=offers))
    return tuple(out)


def launch_placement(
    group: nc.PlacementGroup | None, partition: int | None
) -> tuple[tuple[str, str | int], ...]:
    """The launch template's ``Placement`` fields for the group."""
    if group is None:
        return ()
    fields: list[tuple[str, str | int]] = [("GroupId", group.id)]
    if partition is not None:
        fields.append(("PartitionNumber", partition))
    return tuple(fields)
