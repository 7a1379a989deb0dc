"""DescribePlacementGroups answered by the test proxy (moto 5.2.1 has no placement-group API).

Tests put the groups EC2 would hold into ``Capacity.placement_groups``; the proxy answers the
query-protocol request from them with the XML shape EC2 documents for the action
(``placementGroupSet`` of ``item`` elements), which botocore parses like any EC2 answer.
Unknown names get EC2's ``InvalidPlacementGroup.Unknown`` error and unknown ids
``InvalidPlacementGroupId.NotFound``, since EC2 refuses rather than returning an empty set.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"


@dataclass(frozen=True)
class Group:
    """One placement group as EC2 would describe it."""

    id: str
    name: str
    strategy: str
    state: str = "available"
    partition_count: int = 0
    spread_level: str = ""


def _item(g: Group) -> str:
    parts = [
        f"<groupName>{escape(g.name)}</groupName>",
        f"<state>{g.state}</state>",
        f"<strategy>{g.strategy}</strategy>",
        f"<groupId>{g.id}</groupId>",
        f"<groupArn>arn:aws:ec2:us-east-1:123456789012:placement-group/{escape(g.name)}</groupArn>",
    ]
    if g.partition_count:
        parts.append(f"<partitionCount>{g.partition_count}</partitionCount>")
    if g.spread_level:
        parts.append(f"<spreadLevel>{g.spread_level}</spreadLevel>")
    return "<item>" + "".join(parts) + "</item>"


def _error(code: str, message: str, status: int = 400) -> tuple[int, str]:
    return status, (
        '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{escape(message)}</Message></Error></Errors>"
        "<RequestID>r</RequestID></Response>"
    )


def answer(
    params: dict[str, list[str]], groups: list[Group], denied: bool = False
) -> tuple[int, str]:
    """The HTTP status and body EC2 would give for these DescribePlacementGroups parameters."""
    if denied:
        return _error(
            "UnauthorizedOperation", "You are not authorized to perform this operation.", 403
        )
    ids = [v for k, vs in params.items() if k.startswith("GroupId.") for v in vs]
    names = [v for k, vs in params.items() if k.startswith("GroupName.") for v in vs]
    found = list(groups)
    if ids:
        missing = [i for i in ids if i not in {g.id for g in groups}]
        if missing:
            return _error(
                "InvalidPlacementGroupId.NotFound",
                f"The placement group ID '{missing[0]}' does not exist.",
            )
        found = [g for g in found if g.id in ids]
    if names:
        missing = [n for n in names if n not in {g.name for g in groups}]
        if missing:
            return _error(
                "InvalidPlacementGroup.Unknown", f"The Placement Group '{missing[0]}' is unknown."
            )
        found = [g for g in found if g.name in names]
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><DescribePlacementGroupsResponse xmlns="{_NS}">'
        "<requestId>r</requestId><placementGroupSet>"
        + "".join(_item(g) for g in found)
        + "</placementGroupSet></DescribePlacementGroupsResponse>"
    )
    return 200, body
