"""Launching into a placement group on moto: template placement, compatible types, PG-scoped ICE.

The groups exist only in the proxy (moto has no placement-group API); CreateLaunchTemplate and
CreateFleet go to moto, which stores the template's ``Placement`` as sent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from karpenter.cloud.provider import InsufficientCapacityError
from karpenter.core.model.node import NodeClaim, NodeClassRef
from karpenter.providers.aws.controllers import partition
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import placement
from tests.providers.aws.cloud.builders import node_class
from tests.providers.aws.cloud.conftest import Account, Moto
from tests.providers.aws.cloud.fixtures import NOW, Env, claim, env, prices
from tests.providers.aws.cloud.placement_proxy import Group

__all__ = ("env", "prices")

CLUSTERED = Group("pg-0c1u5t3r", "tight", "cluster")
PARTITIONS = Group("pg-0a1b2c3d", "parts", "partition", partition_count=7)


async def _grouped(e: Env, moto: Moto, group: Group) -> nc.EC2NodeClass:
    """A NodeClass named ``grouped`` in ``group``, resolved through the proxy and Ready."""
    moto.capacity.placement_groups.append(group)
    cls = node_class("grouped", placement_group=nc.SelectorTerm(name=group.name))
    cls = replace(cls, status=await e.resolver.status(cls, NOW))
    assert cls.status.ready() == "True", cls.status.conditions
    e.classes.put(cls)
    return cls


def _in(c: NodeClaim, *extra: tuple[str, str, tuple[str, ...], int | None]) -> NodeClaim:
    ref = NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "grouped")
    return replace(c, node_class_ref=ref, requirements=(*c.requirements, *extra))


async def _template_data(e: Env) -> dict[str, Any]:
    (name,) = e.provider.launch_templates.cached
    out = await e.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
    data: dict[str, Any] = out["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return data


@pytest.mark.asyncio
async def test_cluster_group_launch(env: Env, moto: Moto) -> None:
    """The template names the group, flex types (no cluster support) are not asked for, and
    the claim carries the placement-group-id label."""
    await _grouped(env, moto, CLUSTERED)
    got = await env.provider.create(_in(claim("g-1", "c7i-flex.large", "m5.large")))
    assert got.labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert got.labels[placement.LABEL_ID] == "pg-0c1u5t3r"
    assert placement.LABEL_PARTITION not in got.labels
    assert {t for t, _ in moto.capacity.last_pools} == {"m5.large"}
    data = await _template_data(env)
    assert data["Placement"] == {"GroupId": "pg-0c1u5t3r"}


@pytest.mark.asyncio
async def test_flex_type_launches_without_a_group(env: Env, moto: Moto) -> None:
    """Control for the test above: without a group the cheaper flex type is asked for."""
    got = await env.provider.create(claim("d-1", "c7i-flex.large", "m5.large"))
    assert "c7i-flex.large" in {t for t, _ in moto.capacity.last_pools}
    assert placement.LABEL_ID not in got.labels
    assert "Placement" not in await _template_data(env)


@pytest.mark.asyncio
async def test_partition_pinned_by_the_claim(env: Env, moto: Moto) -> None:
    """A claim that allows only partition 3 launches with PartitionNumber 3 and is labelled."""
    await _grouped(env, moto, PARTITIONS)
    pinned = (placement.LABEL_PARTITION, "In", ("3",), None)
    got = await env.provider.create(_in(claim("g-1", "m5.large"), pinned))
    assert got.labels[placement.LABEL_ID] == "pg-0a1b2c3d"
    assert got.labels[placement.LABEL_PARTITION] == "3"
    data = await _template_data(env)
    assert data["Placement"] == {"GroupId": "pg-0a1b2c3d", "PartitionNumber": 3}


@pytest.mark.asyncio
async def test_partition_types_offer_every_partition(env: Env, moto: Moto) -> None:
    """Types of a partition-group class let pods pick any of its partitions."""
    cls = await _grouped(env, moto, PARTITIONS)
    m5 = next(it for it in env.provider.catalog(cls) if it.name == "m5.large")
    assert m5.requirements[placement.LABEL_PARTITION].values == {str(p) for p in range(1, 8)}
    assert m5.requirements[placement.LABEL_ID].values == {"pg-0a1b2c3d"}


@pytest.mark.asyncio
async def test_full_group_does_not_blacklist_the_zone_for_other_classes(
    env: Env, moto: Moto
) -> None:
    """ICE inside the group hides c5.large for the group's class only; the class outside the
    group still launches c5.large in the same zones."""
    grouped = await _grouped(env, moto, CLUSTERED)
    moto.capacity.empty |= {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")}
    got = await env.provider.create(_in(claim("g-1", "c5.large", "m5.large")))
    assert got.labels["node.kubernetes.io/instance-type"] == "m5.large"
    now = env.clock()
    ice = env.provider.unavailable
    for zone in ("us-east-1a", "us-east-1b"):
        assert ice.is_unavailable("on-demand", "c5.large", zone, now, "pg-0c1u5t3r")
        assert not ice.is_unavailable("on-demand", "c5.large", zone, now)

    def c5_available(cls: nc.EC2NodeClass) -> bool:
        c5 = next(it for it in env.provider.catalog(cls) if it.name == "c5.large")
        return any(o.available for o in c5.offerings if o.capacity_type == "on-demand")

    assert not c5_available(grouped)
    assert c5_available(env.classes.items["default"])
    moto.capacity.empty.clear()
    other = await env.provider.create(claim("d-1", "c5.large"))
    assert other.labels["node.kubernetes.io/instance-type"] == "c5.large"


@pytest.mark.asyncio
async def test_partition_ice_is_kept_per_partition(env: Env, moto: Moto) -> None:
    """ICE for a launch pinned to partition 2 is remembered as <pg>:2, not for the group."""
    await _grouped(env, moto, PARTITIONS)
    moto.capacity.empty |= {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")}
    pinned = (placement.LABEL_PARTITION, "In", ("2",), None)
    await env.provider.create(_in(claim("g-1", "c5.large", "m5.large"), pinned))
    now = env.clock()
    ice = env.provider.unavailable
    assert ice.is_unavailable("on-demand", "c5.large", "us-east-1a", now, "pg-0a1b2c3d:2")
    assert not ice.is_unavailable("on-demand", "c5.large", "us-east-1a", now, "pg-0a1b2c3d")


@pytest.mark.asyncio
async def test_placement_group_drift(env: Env, moto: Moto, account: Account) -> None:
    """A claim launched into one group drifts once its class resolves to another group."""
    cls = await _grouped(env, moto, CLUSTERED)
    got = await env.provider.create(_in(claim("g-1", "m5.large")))
    # moto attaches the VPC default group, EC2 the template's (see test_gc_drift.launch)
    await env.clients.ec2.modify_instance_attribute(
        InstanceId=got.provider_id.rsplit("/", 1)[1], Groups=[account.security_group]
    )
    assert await env.provider.is_drifted(got) == ""
    moto.capacity.placement_groups.append(PARTITIONS)
    moved = replace(cls, spec=replace(cls.spec, placement_group=nc.SelectorTerm(name="parts")))
    env.classes.put(replace(moved, status=await env.resolver.status(moved, NOW)))
    assert await env.provider.is_drifted(got) == "PlacementGroupDrift"


@pytest.mark.asyncio
async def test_partition_assigned_by_ec2_is_labelled(env: Env, moto: Moto) -> None:
    """Without a pinned partition the template names none, and the partition EC2 assigned
    (read back with DescribeInstances) becomes the claim's label."""
    await _grouped(env, moto, PARTITIONS)
    moto.capacity.partition_number = 5
    got = await env.provider.create(_in(claim("g-1", "m5.large")))
    assert got.labels[placement.LABEL_PARTITION] == "5"
    assert (await _template_data(env))["Placement"] == {"GroupId": "pg-0a1b2c3d"}


@pytest.mark.asyncio
async def test_partition_not_yet_visible_leaves_the_label_unset(env: Env, moto: Moto) -> None:
    """If DescribeInstances shows no partition, the claim is launched without the label."""
    await _grouped(env, moto, PARTITIONS)
    got = await env.provider.create(_in(claim("g-1", "m5.large")))
    assert got.labels[placement.LABEL_ID] == "pg-0a1b2c3d"
    assert placement.LABEL_PARTITION not in got.labels


SPREAD_FULL = (
    "You've reached the limit of instances in this spread placement group. A spread placement "
    "group can have up to seven instances per Availability Zone."
)


@pytest.mark.asyncio
async def test_full_spread_group_closes_the_zone_for_the_group(env: Env, moto: Moto) -> None:
    """EC2's spread-limit error hides every type in that zone for the group (not outside it);
    the launch lands in another zone."""
    grouped = await _grouped(
        env, moto, Group("pg-05pr3ad0", "apart", "spread", spread_level="rack")
    )
    full = {("c5.large", "us-east-1a"), ("m5.large", "us-east-1a")}
    moto.capacity.empty |= full
    moto.capacity.codes.update(dict.fromkeys(full, "UnfulfillableCapacity"))
    moto.capacity.messages.update(dict.fromkeys(full, SPREAD_FULL))
    got = await env.provider.create(_in(claim("g-1", "c5.large", "m5.large")))
    assert got.labels["topology.kubernetes.io/zone"] == "us-east-1b"
    now = env.clock()
    ice = env.provider.unavailable
    assert ice.is_unavailable("on-demand", "r5.large", "us-east-1a", now, "pg-05pr3ad0")
    assert not ice.is_unavailable("on-demand", "r5.large", "us-east-1b", now, "pg-05pr3ad0")
    assert not ice.is_unavailable("on-demand", "r5.large", "us-east-1a", now)
    r5 = next(it for it in env.provider.catalog(grouped) if it.name == "r5.large")
    on_demand = {o.zone for o in r5.offerings if o.available and o.capacity_type == "on-demand"}
    assert on_demand == {"us-east-1b"}


@pytest.mark.asyncio
async def test_plain_capacity_error_in_a_spread_group_stays_per_type(env: Env, moto: Moto) -> None:
    """An ordinary ICE inside a spread group hides only that type (scoped to the group)."""
    await _grouped(env, moto, Group("pg-05pr3ad0", "apart", "spread", spread_level="rack"))
    moto.capacity.empty |= {("c5.large", "us-east-1a")}
    await env.provider.create(_in(claim("g-1", "c5.large", "m5.large")))
    now = env.clock()
    ice = env.provider.unavailable
    assert ice.is_unavailable("on-demand", "c5.large", "us-east-1a", now, "pg-05pr3ad0")
    assert not ice.is_unavailable("on-demand", "r5.large", "us-east-1a", now, "pg-05pr3ad0")


class _Labeller:
    """Records the labels the partition controller writes."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str, dict[str, str]]] = []

    async def label(self, name: str, node_name: str, labels: dict[str, str]) -> None:
        self.written.append((name, node_name, labels))


@pytest.mark.asyncio
async def test_partition_shown_later_is_labelled_by_the_controller(env: Env, moto: Moto) -> None:
    """A partition EC2 did not show at launch is written on the claim and its Node later."""
    await _grouped(env, moto, PARTITIONS)
    got = await env.provider.create(_in(claim("g-1", "m5.large")))
    assert placement.LABEL_PARTITION not in got.labels
    labeller = _Labeller()
    assert not await partition.reconcile(got, env.provider, labeller)  # still not shown
    moto.capacity.partition_number = 6
    registered = replace(got, registered=True, node_name="ip-10-0-0-1")
    assert await partition.reconcile(registered, env.provider, labeller)
    assert labeller.written == [("g-1", "ip-10-0-0-1", {placement.LABEL_PARTITION: "6"})]
    labelled = replace(registered, labels={**got.labels, placement.LABEL_PARTITION: "6"})
    assert not await partition.reconcile(labelled, env.provider, labeller)


@pytest.mark.asyncio
async def test_partition_controller_leaves_other_groups_alone(env: Env, moto: Moto) -> None:
    """Claims in cluster groups or outside groups cost no DescribeInstances."""
    await _grouped(env, moto, CLUSTERED)
    in_cluster = await env.provider.create(_in(claim("g-1", "m5.large")))
    outside = await env.provider.create(claim("d-1", "m5.large"))
    before = moto.capacity.calls["DescribeInstances"]
    labeller = _Labeller()
    for c in (in_cluster, outside):
        assert not await partition.reconcile(c, env.provider, labeller)
    assert moto.capacity.calls["DescribeInstances"] == before
    assert labeller.written == []


@pytest.mark.asyncio
async def test_failed_group_launch_names_no_pools_for_the_cluster(env: Env, moto: Moto) -> None:
    """When every pool is full inside the group, the InsufficientCapacityError names no pools:
    the provisioner would hide named pools for every NodePool, not just the group's."""
    await _grouped(env, moto, CLUSTERED)
    moto.capacity.empty |= {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")}
    with pytest.raises(InsufficientCapacityError) as info:
        await env.provider.create(_in(claim("g-1", "c5.large")))
    assert info.value.offerings == ()
    assert env.provider.unavailable.is_unavailable(
        "on-demand", "c5.large", "us-east-1a", env.clock(), "pg-0c1u5t3r"
    )
