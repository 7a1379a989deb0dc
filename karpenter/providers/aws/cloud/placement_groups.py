"""Placement-group resolution: ``spec.placementGroupSelector`` → one EC2 placement group.

DescribePlacementGroups by ``GroupIds`` or ``GroupNames``, as upstream. EC2 answers an unknown
name or id with an error rather than an empty list, so those codes (classified in
``errors.py``) read as "not found"; any other failure is a resolution failure. The result
feeds ``status.placementGroups`` and the ``PlacementGroupReady`` condition
(``aws/core/placement.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud.clients import Client
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import placement


@dataclass(frozen=True, slots=True)
class Resolution:
    """What the lookup found: the group (None: none usable) and the condition to report."""

    group: nc.PlacementGroup | None
    condition: nc.Condition


def _group(raw: dict[str, object]) -> nc.PlacementGroup:
    count = raw.get("PartitionCount", 0)
    return nc.PlacementGroup(
        str(raw.get("GroupId", "")),
        str(raw.get("GroupName", "")),
        str(raw.get("Strategy", "")),
        str(raw.get("State", "")),
        count if isinstance(count, int) else 0,
        str(raw.get("SpreadLevel", "") or ""),
    )


async def describe(ec2: Client, selector: nc.SelectorTerm) -> nc.PlacementGroup | None:
    """The group the selector names, or None when EC2 has none by that name or id."""
    query = {"GroupIds": [selector.id]} if selector.id else {"GroupNames": [selector.name]}
    try:
        out = await ec2.describe_placement_groups(**query)
    except Exception as err:
        if errors.is_not_found(err):
            return None
        raise
    found = [_group(g) for g in out.get("PlacementGroups", [])]
    return found[0] if found else None


async def resolve(ec2: Client, selector: nc.SelectorTerm | None) -> Resolution:
    """The selector's group, kept only while it is ``available``, and its condition."""
    if selector is None:
        return Resolution(None, placement.condition(None, None))
    try:
        group = await describe(ec2, selector)
    except Exception as err:
        reason = errors.code(err) or type(err).__name__
        return Resolution(None, placement.condition(selector, None, reason))
    cond = placement.condition(selector, group)
    return Resolution(group if cond.status == "True" else None, cond)
