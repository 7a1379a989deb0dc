"""Placement groups in the pure core: condition, compatibility, labels, ICE scoping, placement."""

from __future__ import annotations

from dataclasses import replace

import pytest

from karpenter.core.model.cluster import Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.providers.aws.api import ec2nodeclass
from karpenter.providers.aws.core import catalog, drift, placement, pricing
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.unavailable import UnavailableOfferings
from tests.support import builders as b

CLUSTER = nc.PlacementGroup("pg-0c1", "tight", "cluster")
PARTITION = nc.PlacementGroup("pg-0p4", "parts", "partition", partition_count=3)
SPREAD = nc.PlacementGroup("pg-05p", "apart", "spread", spread_level="rack")


@pytest.mark.parametrize(
    ("selector", "found", "error", "want"),
    [
        pytest.param(None, None, "", ("True", "PlacementGroupReady", ""), id="no-selector"),
        pytest.param(
            nc.SelectorTerm(name="tight"),
            CLUSTER,
            "",
            ("True", "PlacementGroupReady", ""),
            id="found",
        ),
        pytest.param(
            nc.SelectorTerm(id="pg-0c1"),
            None,
            "",
            ("False", "PlacementGroupNotFound", 'Placement group "pg-0c1" not found'),
            id="not-found-by-id",
        ),
        pytest.param(
            nc.SelectorTerm(name="tight"),
            replace(CLUSTER, state="deleting"),
            "",
            (
                "False",
                "PlacementGroupNotAvailable",
                'Placement group "tight" is in state "deleting", expected "available"',
            ),
            id="not-available",
        ),
        pytest.param(
            nc.SelectorTerm(name="tight"),
            None,
            "RequestLimitExceeded",
            (
                "False",
                "PlacementGroupResolutionFailed",
                'Failed to resolve placement group "tight": RequestLimitExceeded',
            ),
            id="failed",
        ),
    ],
)
def test_condition(
    selector: nc.SelectorTerm | None,
    found: nc.PlacementGroup | None,
    error: str,
    want: tuple[str, str, str],
) -> None:
    """PlacementGroupReady carries upstream's reason and message for each outcome."""
    cond = placement.condition(selector, found, error)
    assert cond.type == "PlacementGroupReady"
    assert (cond.status, cond.reason, cond.message) == want


def test_cluster_group_excludes_types_without_cluster_support(
    ec2: dict[str, InstanceTypeInfo],
) -> None:
    """Flex types cannot join a cluster group (EC2 says so); they can join a spread group."""
    assert "cluster" not in ec2["c7i-flex.large"].placement_strategies
    assert placement.supports(ec2["m5.large"], CLUSTER)
    assert not placement.supports(ec2["c7i-flex.large"], CLUSTER)
    assert placement.supports(ec2["c7i-flex.large"], SPREAD)
    assert placement.supports(ec2["c7i-flex.large"], None)


def _input(group: nc.PlacementGroup | None) -> catalog.CatalogInput:
    prices = {"m5.large": 0.096, "c7i-flex.large": 0.085}
    return catalog.CatalogInput(
        region="us-east-1",
        zones={"m5.large": ("us-east-1a", "us-east-1b"), "c7i-flex.large": ("us-east-1a",)},
        prices=pricing.PriceTable("us-east-1", prices, {}, prices),
        placement_group=group,
    )


def test_catalogue_offers_nothing_of_incompatible_types(ec2: dict[str, InstanceTypeInfo]) -> None:
    """In a cluster group, c7i-flex offerings are all unavailable; m5 ones stay available."""
    flex = catalog.instance_type(ec2["c7i-flex.large"], _input(CLUSTER))
    m5 = catalog.instance_type(ec2["m5.large"], _input(CLUSTER))
    assert flex is not None and m5 is not None
    assert flex.offerings and not any(o.available for o in flex.offerings)
    assert all(o.available for o in m5.offerings if o.capacity_type == "on-demand")
    plain = catalog.instance_type(ec2["c7i-flex.large"], _input(None))
    assert plain is not None and any(o.available for o in plain.offerings)


def test_types_carry_group_and_partition_requirements(ec2: dict[str, InstanceTypeInfo]) -> None:
    """Partition groups add placement-group-id and partition 1..N; other groups only the id."""
    it = catalog.instance_type(ec2["m5.large"], _input(PARTITION))
    assert it is not None
    assert it.requirements[placement.LABEL_ID].values == {"pg-0p4"}
    assert it.requirements[placement.LABEL_PARTITION].values == {"1", "2", "3"}
    spread = catalog.instance_type(ec2["m5.large"], _input(SPREAD))
    assert spread is not None
    assert spread.requirements[placement.LABEL_ID].values == {"pg-05p"}
    assert placement.LABEL_PARTITION not in spread.requirements
    none = catalog.instance_type(ec2["m5.large"], _input(None))
    assert none is not None and placement.LABEL_ID not in none.requirements


def test_group_scoped_ice_hides_the_pool_only_inside_the_group(
    ec2: dict[str, InstanceTypeInfo],
) -> None:
    """ICE met in a group hides the pool for that group's catalogue, not for any other."""
    ice = UnavailableOfferings()
    ice.mark("on-demand", "m5.large", "us-east-1a", 100.0, placement.ice_scope(CLUSTER))
    assert ice.key("on-demand", "m5.large", "us-east-1a", "pg-0c1") in ice.active(150.0)

    def available(group: nc.PlacementGroup | None) -> bool:
        it = catalog.instance_type(ec2["m5.large"], _input(group), ice, 150.0)
        assert it is not None
        return next(
            o.available
            for o in it.offerings
            if (o.zone, o.capacity_type) == ("us-east-1a", "on-demand")
        )

    assert not available(CLUSTER)
    assert available(None)
    assert available(SPREAD)
    # forgotten after 3 minutes
    assert not ice.is_unavailable("on-demand", "m5.large", "us-east-1a", 400.0, "pg-0c1")


def test_unscoped_ice_still_hides_the_pool_inside_groups() -> None:
    """A zone-wide ICE applies to launches in a group as well."""
    ice = UnavailableOfferings()
    ice.mark("spot", "m5.large", "us-east-1b", 0.0)
    assert ice.is_unavailable("spot", "m5.large", "us-east-1b", 1.0, "pg-0c1")
    assert ice.is_unavailable("spot", "m5.large", "us-east-1b", 1.0)


def _reqs(*values: str) -> Requirements:
    return Requirements([Requirement.new(placement.LABEL_PARTITION, "In", values)])


@pytest.mark.parametrize(
    ("group", "reqs", "want"),
    [
        pytest.param(PARTITION, _reqs("2"), 2, id="one-partition"),
        pytest.param(PARTITION, _reqs("1", "2"), None, id="two-partitions"),
        pytest.param(PARTITION, Requirements(), None, id="unconstrained"),
        pytest.param(PARTITION, _reqs("9"), None, id="beyond-count"),
        pytest.param(CLUSTER, _reqs("2"), None, id="not-a-partition-group"),
        pytest.param(None, _reqs("2"), None, id="no-group"),
    ],
)
def test_pinned_partition(
    group: nc.PlacementGroup | None, reqs: Requirements, want: int | None
) -> None:
    """A claim pins a partition only when its requirements allow exactly one valid one."""
    assert placement.pinned_partition(group, reqs) == want


def test_launch_placement_and_scopes() -> None:
    """The template's Placement names the group id, plus the partition when pinned."""
    assert placement.launch_placement(None, None) == ()
    assert placement.launch_placement(CLUSTER, None) == (("GroupId", "pg-0c1"),)
    assert placement.launch_placement(PARTITION, 2) == (
        ("GroupId", "pg-0p4"),
        ("PartitionNumber", 2),
    )
    assert placement.ice_scope(None) == ""
    assert placement.ice_scope(PARTITION, 2) == "pg-0p4:2"


def test_partition_ice_applies_to_launches_pinned_to_that_partition(
    ec2: dict[str, InstanceTypeInfo],
) -> None:
    """ICE in partition 2 hides the pool for claims pinned to 2, not for the group at large."""
    ice = UnavailableOfferings()
    ice.mark("on-demand", "m5.large", "us-east-1a", 0.0, placement.ice_scope(PARTITION, 2))
    types = catalog.build([ec2["m5.large"]], _input(PARTITION), ice, 1.0)

    def od_1a(ts: tuple[InstanceType, ...]) -> bool:
        return next(
            o.available
            for o in ts[0].offerings
            if (o.zone, o.capacity_type) == ("us-east-1a", "on-demand")
        )

    assert od_1a(types)
    assert not od_1a(placement.hide_partition_ice(types, ice, "pg-0p4:2", 1.0))
    assert od_1a(placement.hide_partition_ice(types, ice, "pg-0p4:1", 1.0))


@pytest.mark.parametrize(
    ("label", "groups", "want"),
    [
        pytest.param(None, (), "", id="no-group-anywhere"),
        pytest.param("pg-0c1", (CLUSTER,), "", id="same-group"),
        pytest.param("pg-0c1", (PARTITION,), "PlacementGroupDrift", id="other-group"),
        pytest.param("pg-0c1", (), "PlacementGroupDrift", id="group-removed"),
        pytest.param(None, (CLUSTER,), "PlacementGroupDrift", id="group-added"),
    ],
)
def test_placement_group_drift(
    label: str | None, groups: tuple[nc.PlacementGroup, ...], want: str
) -> None:
    """The claim's placement-group-id label must equal the class's resolved group id."""
    facts = drift.InstanceFacts("ami-1", "subnet-1", frozenset({"sg-1"}))
    status = nc.Status(
        subnets=(nc.Subnet("subnet-1", "us-east-1a"),),
        security_groups=(nc.SecurityGroup("sg-1"),),
        placement_groups=groups,
    )
    labels = {placement.LABEL_ID: label} if label else {}
    assert drift.drift_reason(facts, status, None, {}, {}, labels) == want
    assert drift.drift_reason(facts, status, None, {}, {}) == ""  # labels not given: unchecked


def test_pods_spread_over_partitions_pin_one_partition_per_claim(
    ec2: dict[str, InstanceTypeInfo],
) -> None:
    """A topology spread over the partition key yields claims each pinned to a different
    partition (the domains come from the types' partition requirement)."""
    group = replace(PARTITION, partition_count=3)
    types = catalog.build([ec2["m5.large"], ec2["m5.xlarge"]], _input(group))
    spread = (b.spread(placement.LABEL_PARTITION),)
    pods = [b.pod(labels={"app": "web"}, cpu="100m", topology_spread=spread) for _ in range(3)]
    result = solve(b.cluster(types=types), pods, Options())
    assert result.unschedulable == {}
    pinned = [placement.pinned_partition(group, c.requirements) for c in result.new_claims]
    assert sorted(p for p in pinned if p is not None) == [1, 2, 3]


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param({"name": "tight"}, nc.SelectorTerm(name="tight"), id="name"),
        pytest.param({"id": "pg-0c1"}, nc.SelectorTerm(id="pg-0c1"), id="id"),
        pytest.param(None, None, id="none"),
    ],
)
def test_manifest_selector_and_status_reach_the_core(
    selector: dict[str, str] | None, want: nc.SelectorTerm | None
) -> None:
    """placementGroupSelector and status.placementGroups come through ``from_manifest``."""
    spec: dict[str, object] = {
        "role": "r",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"k": "v"}}],
        "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
    }
    if selector is not None:
        spec["placementGroupSelector"] = selector
    status = {"placementGroups": [{"id": "pg-0c1", "name": "tight", "strategy": "cluster"}]}
    got = ec2nodeclass.from_manifest({"metadata": {"name": "c"}, "spec": spec, "status": status})
    assert got.spec.placement_group == want
    assert got.status.placement_group() == nc.PlacementGroup("pg-0c1", "tight", "cluster", "")


def test_manifest_selector_needs_exactly_one_of_name_and_id() -> None:
    """The CRD's rule: exactly one of name and id."""
    spec = {
        "role": "r",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"k": "v"}}],
        "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
        "placementGroupSelector": {"name": "a", "id": "pg-1"},
    }
    with pytest.raises(ValueError, match="exactly one of"):
        ec2nodeclass.from_manifest({"metadata": {"name": "c"}, "spec": spec})
