"""placementGroupSelector → status.placementGroups and PlacementGroupReady, against the proxy.

moto has no placement groups; the proxy answers DescribePlacementGroups from the groups each
test sets (``placement_proxy.py``), over real HTTP through botocore.
"""

from __future__ import annotations

import datetime as dt

import pytest

from karpenter.providers.aws.api import ec2nodeclass_status
from karpenter.providers.aws.cloud import resolve
from karpenter.providers.aws.cloud.clients import Clients
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.builders import node_class
from tests.providers.aws.cloud.conftest import Account, Moto
from tests.providers.aws.cloud.placement_proxy import Group

NOW = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
PARTITIONS = Group("pg-0a1b2c3d", "ml-partitions", "partition", partition_count=7)
CLUSTERED = Group("pg-0c1u5t3r", "tight", "cluster")
SPREAD = Group("pg-05pr3ad0", "apart", "spread", spread_level="rack")


async def _status(clients: Clients, cluster: str, selector: nc.SelectorTerm | None) -> nc.Status:
    cls = node_class(placement_group=selector)
    return await resolve.Resolver(clients, cluster, "1.31").status(cls, NOW)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "selector",
    [
        pytest.param(nc.SelectorTerm(name="ml-partitions"), id="by-name"),
        pytest.param(nc.SelectorTerm(id="pg-0a1b2c3d"), id="by-id"),
    ],
)
async def test_selector_resolves_group(
    clients: Clients, account: Account, cluster: str, moto: Moto, selector: nc.SelectorTerm
) -> None:
    """A selector by name or by id puts the group in status and PlacementGroupReady=True."""
    moto.capacity.placement_groups.extend([CLUSTERED, PARTITIONS, SPREAD])
    status = await _status(clients, cluster, selector)
    assert status.placement_groups == (
        nc.PlacementGroup("pg-0a1b2c3d", "ml-partitions", "partition", "available", 7),
    )
    cond = status.condition("PlacementGroupReady")
    assert cond is not None and cond.status == "True"
    assert status.ready() == "True"
    assert moto.capacity.calls["DescribePlacementGroups"] == 1


@pytest.mark.asyncio
async def test_no_selector_is_ready_without_a_call(
    clients: Clients, account: Account, cluster: str, moto: Moto
) -> None:
    """Without a selector the condition is True and EC2 is not asked."""
    status = await _status(clients, cluster, None)
    cond = status.condition("PlacementGroupReady")
    assert cond is not None and cond.status == "True"
    assert status.placement_groups == ()
    assert moto.capacity.calls["DescribePlacementGroups"] == 0


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "selector",
    [
        pytest.param(nc.SelectorTerm(name="missing"), id="name"),
        pytest.param(nc.SelectorTerm(id="pg-0ffff"), id="id"),
    ],
)
async def test_unknown_group_is_not_found(
    clients: Clients, account: Account, cluster: str, moto: Moto, selector: nc.SelectorTerm
) -> None:
    """EC2's unknown-group errors read as PlacementGroupNotFound and the class is not Ready."""
    moto.capacity.placement_groups.append(CLUSTERED)
    status = await _status(clients, cluster, selector)
    cond = status.condition("PlacementGroupReady")
    assert cond is not None
    text = selector.name or selector.id
    assert (cond.status, cond.reason, cond.message) == (
        "False",
        "PlacementGroupNotFound",
        f'Placement group "{text}" not found',
    )
    assert status.placement_groups == ()
    assert status.ready() == "False"


@pytest.mark.asyncio
async def test_group_not_available(
    clients: Clients, account: Account, cluster: str, moto: Moto
) -> None:
    """A group still being created is not used: PlacementGroupNotAvailable."""
    moto.capacity.placement_groups.append(Group("pg-0aaa", "new", "cluster", state="pending"))
    status = await _status(clients, cluster, nc.SelectorTerm(name="new"))
    cond = status.condition("PlacementGroupReady")
    assert cond is not None
    assert (cond.status, cond.reason, cond.message) == (
        "False",
        "PlacementGroupNotAvailable",
        'Placement group "new" is in state "pending", expected "available"',
    )
    assert status.placement_groups == ()


@pytest.mark.asyncio
async def test_describe_denied_is_resolution_failure(
    clients: Clients, account: Account, cluster: str, moto: Moto
) -> None:
    """Any other EC2 error (here IAM denying the call) is PlacementGroupResolutionFailed."""
    moto.capacity.placement_groups.append(CLUSTERED)
    moto.capacity.deny.add("DescribePlacementGroups")
    status = await _status(clients, cluster, nc.SelectorTerm(name="tight"))
    cond = status.condition("PlacementGroupReady")
    assert cond is not None
    assert (cond.status, cond.reason) == ("False", "PlacementGroupResolutionFailed")
    assert cond.message == 'Failed to resolve placement group "tight": UnauthorizedOperation'
    assert status.ready() == "False"


def test_status_round_trips_through_the_crd_shape() -> None:
    """status.placementGroups survives status_doc → status_from_doc with its fields."""
    status = nc.Status(
        placement_groups=(
            nc.PlacementGroup("pg-05pr3ad0", "apart", "spread", "available", 0, "rack"),
        )
    )
    doc = ec2nodeclass_status.status_doc(status, "2026-11-23T00:00:00Z")
    assert doc["placementGroups"] == [
        {
            "id": "pg-05pr3ad0",
            "name": "apart",
            "strategy": "spread",
            "state": "available",
            "spreadLevel": "rack",
        }
    ]
    assert ec2nodeclass_status.status_from_doc(doc).placement_groups == status.placement_groups


def test_status_without_a_group_clears_the_field() -> None:
    """The status is merge-patched: no group is written as an empty list, not left out."""
    doc = ec2nodeclass_status.status_doc(nc.Status(), "2026-11-23T00:00:00Z")
    assert doc["placementGroups"] == []
