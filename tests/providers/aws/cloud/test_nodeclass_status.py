"""EC2NodeClass status against moto: subnets, security groups, AMIs, instance profile."""

from __future__ import annotations

import datetime as dt

import pytest

from karpenter.providers.aws.cloud import resolve
from karpenter.providers.aws.cloud.clients import Clients
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.builders import node_class
from tests.providers.aws.cloud.conftest import Account, Moto

NOW = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)


def resolver(clients: Clients, cluster: str) -> resolve.Resolver:
    return resolve.Resolver(clients, cluster, "1.31")


@pytest.mark.asyncio
async def test_found_everything_is_ready(clients: Clients, account: Account, cluster: str) -> None:
    """Tagged subnets and group, alias AMIs via SSM, a managed profile: Ready=True."""
    status = await resolver(clients, cluster).status(node_class(), NOW)
    assert {s.id for s in status.subnets} == set(account.subnets.values())
    assert {s.zone for s in status.subnets} == {"us-east-1a", "us-east-1b"}
    assert all(s.zone_id.startswith("use1-az") for s in status.subnets)
    assert [g.id for g in status.security_groups] == [account.security_group]
    assert {a.id for a in status.amis} == {account.ami_standard, account.ami_nvidia}
    nvidia = next(a for a in status.amis if a.id == account.ami_nvidia)
    assert ("karpenter.k8s.aws/instance-gpu-count", "Exists", ()) in nvidia.requirements
    assert status.instance_profile.startswith(f"{cluster}_")
    assert status.ready() == "True"
    assert {c.type for c in status.conditions} >= {
        "AMIsReady",
        "SubnetsReady",
        "SecurityGroupsReady",
        "InstanceProfileReady",
        "ValidationSucceeded",
    }
    profile = await clients.iam.get_instance_profile(InstanceProfileName=status.instance_profile)
    assert [r["RoleName"] for r in profile["InstanceProfile"]["Roles"]] == [
        "KarpenterNodeRole-demo"
    ]
    assert profile["InstanceProfile"]["Path"] == f"/karpenter/us-east-1/{cluster}/uid-default/"


@pytest.mark.asyncio
async def test_subnets_not_found(clients: Clients, account: Account, cluster: str) -> None:
    """A selector matching no subnet: SubnetsReady=False SubnetsNotFound, Ready=False."""
    cls = node_class(
        subnet_selector_terms=(nc.SelectorTerm(tags={"karpenter.sh/discovery": "other"}),)
    )
    status = await resolver(clients, cluster).status(cls, NOW)
    cond = status.condition("SubnetsReady")
    assert cond is not None
    assert (cond.status, cond.reason, cond.message) == (
        "False",
        "SubnetsNotFound",
        "SubnetSelector did not match any Subnets",
    )
    assert status.ready() == "False"
    validation = status.condition("ValidationSucceeded")
    assert validation is not None and validation.reason == "DependenciesNotReady"


@pytest.mark.asyncio
async def test_amis_not_found(clients: Clients, account: Account, cluster: str) -> None:
    """An alias whose SSM parameters do not exist: AMIsReady=False AMINotFound."""
    cls = node_class(ami_selector_terms=(nc.SelectorTerm(alias="bottlerocket@latest"),))
    status = await resolver(clients, cluster).status(cls, NOW)
    cond = status.condition("AMIsReady")
    assert cond is not None
    assert (cond.status, cond.reason) == ("False", "AMINotFound")
    assert status.amis == ()


@pytest.mark.asyncio
async def test_ami_by_id_name_and_tags(clients: Clients, account: Account, cluster: str) -> None:
    """AMIs by id, by name (owner defaults to self/amazon) and by tag."""
    r = resolver(clients, cluster)
    by_id = await r.amis((nc.SelectorTerm(id=account.ami_custom),), NOW)
    assert [a.id for a in by_id] == [account.ami_custom]
    assert by_id[0].requirements == (("kubernetes.io/arch", "In", ("amd64",)),)
    by_name = await r.amis((nc.SelectorTerm(name="team-golden-image"),), NOW)
    assert [a.id for a in by_name] == [account.ami_custom]
    await clients.ec2.create_tags(
        Resources=[account.ami_custom], Tags=[{"Key": "team", "Value": "a"}]
    )
    by_tag = await r.amis((nc.SelectorTerm(tags={"team": "*"}),), NOW)
    assert [a.id for a in by_tag] == [account.ami_custom]
    wrong_owner = await r.amis((nc.SelectorTerm(name="team-golden-image", owner="amazon"),), NOW)
    assert wrong_owner == ()


@pytest.mark.asyncio
async def test_subnet_ids_and_group_names(clients: Clients, account: Account, cluster: str) -> None:
    """Subnets by id and security groups by name resolve; unknown ids are simply absent."""
    r = resolver(clients, cluster)
    one = account.subnets["us-east-1a"]
    got = await r.subnets((nc.SelectorTerm(id=one),))
    assert [s.id for s in got] == [one]
    groups = await r.security_groups((nc.SelectorTerm(name="nodes"),))
    assert [g.id for g in groups] == [account.security_group]


@pytest.mark.asyncio
async def test_instance_profile_not_found_and_restricted_tags(
    clients: Clients, account: Account, cluster: str
) -> None:
    """A missing spec.instanceProfile and restricted spec.tags are named in the conditions."""
    cls = node_class(role="", instance_profile="nope")
    status = await resolver(clients, cluster).status(cls, NOW)
    cond = status.condition("InstanceProfileReady")
    assert cond is not None and (cond.reason, cond.message) == (
        "InstanceProfileNotFound",
        'Instance profile "nope" not found',
    )
    tagged = node_class(tags={"karpenter.sh/nodepool": "x"})
    status = await resolver(clients, cluster).status(tagged, NOW)
    validation = status.condition("ValidationSucceeded")
    assert validation is not None and validation.reason == "TagValidationFailed"


@pytest.mark.asyncio
async def test_role_change_moves_profile_to_new_role(
    clients: Clients, account: Account, cluster: str
) -> None:
    """Changing spec.role re-points the managed profile at the new role."""
    r = resolver(clients, cluster)
    await r.instance_profile(node_class())
    await clients.iam.create_role(RoleName="Other", AssumeRolePolicyDocument="{}")
    name = await r.instance_profile(node_class(role="arn:aws:iam::123456789012:role/path/Other"))
    profile = await clients.iam.get_instance_profile(InstanceProfileName=name)
    assert [x["RoleName"] for x in profile["InstanceProfile"]["Roles"]] == ["Other"]


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        pytest.param("CreateFleet", "CreateFleetAuthCheckFailed", id="create-fleet"),
        pytest.param("RunInstances", "RunInstancesAuthCheckFailed", id="run-instances"),
        pytest.param(
            "CreateLaunchTemplate", "CreateLaunchTemplateAuthCheckFailed", id="launch-template"
        ),
    ],
)
@pytest.mark.asyncio
async def test_dry_run_denied_fails_validation(
    clients: Clients, account: Account, cluster: str, moto: Moto, action: str, reason: str
) -> None:
    """A dry run answered UnauthorizedOperation fails ValidationSucceeded with upstream's reason."""
    moto.capacity.deny.add(action)
    status = await resolver(clients, cluster).status(node_class(), NOW)
    cond = status.condition("ValidationSucceeded")
    assert cond is not None and (cond.status, cond.reason) == ("False", reason)
    assert cond.message == f"Controller isn't authorized to call ec2:{action}"
    assert status.ready() == "False"
    skipped = resolve.Resolver(clients, cluster, "1.31", dry_run=False)
    assert (await skipped.status(node_class(), NOW)).ready() == "True"


@pytest.mark.parametrize(
    ("alias", "version", "fragment"),
    [
        pytest.param(
            "al2@latest", "1.33", "AL2 aliases are no longer supported on EKS 1.33+", id="al2-1.33"
        ),
        pytest.param(
            "windows2025@latest", "1.34", "requires EKS version 1.35 or higher", id="win2025-1.34"
        ),
    ],
)
@pytest.mark.asyncio
async def test_unsupported_alias(
    clients: Clients, account: Account, cluster: str, alias: str, version: str, fragment: str
) -> None:
    """Aliases a Kubernetes version cannot use: AMIsReady=False UnsupportedAlias."""
    cls = node_class(ami_selector_terms=(nc.SelectorTerm(alias=alias),))
    status = await resolve.Resolver(clients, cluster, version).status(cls, NOW)
    cond = status.condition("AMIsReady")
    assert cond is not None and (cond.status, cond.reason) == ("False", "UnsupportedAlias")
    assert fragment in cond.message


def test_ssm_cache_expiry_and_deprecation_eviction() -> None:
    """Values live until their expiry; a deprecated AMI evicts every parameter pointing at it."""
    cache = resolve.SSMCache()
    cache.put("/aws/service/a", "ami-1", until=100.0)
    cache.put("/aws/service/b", "ami-2", until=100.0)
    assert cache.get("/aws/service/a", 99.0) == "ami-1"
    assert cache.get("/aws/service/a", 100.0) is None
    cache.evict_values({"ami-2"})
    assert cache.get("/aws/service/b", 0.0) is None
    assert cache.get("/aws/service/a", 0.0) == "ami-1"


@pytest.mark.asyncio
async def test_dry_run_outcome_cached_30m(
    clients: Clients, account: Account, cluster: str, moto: Moto
) -> None:
    """A dry-run outcome is reused for 30 minutes unless the NodeClass's launch inputs change."""
    r = resolver(clients, cluster)
    moto.capacity.deny.add("CreateFleet")
    first = await r.status(node_class(), NOW)
    assert first.ready() == "False"
    moto.capacity.deny.clear()  # IAM fixed: the cached denial still stands for 30 minutes
    fleets = moto.capacity.calls["CreateFleet"]
    later = await r.status(node_class(), NOW + dt.timedelta(minutes=29))
    cond = later.condition("ValidationSucceeded")
    assert cond is not None and cond.reason == "CreateFleetAuthCheckFailed"
    assert moto.capacity.calls["CreateFleet"] == fleets  # answered from the cache
    # other tags are other launch inputs: checked again at once
    tagged = await r.status(node_class(tags={"team": "a"}), NOW + dt.timedelta(minutes=29))
    assert tagged.ready() == "True"
    assert moto.capacity.calls["CreateFleet"] == fleets + 1
    expired = await r.status(node_class(), NOW + dt.timedelta(minutes=30))
    assert expired.ready() == "True"
    assert moto.capacity.calls["CreateFleet"] == fleets + 2


@pytest.mark.asyncio
async def test_disable_dry_run_makes_no_dry_runs(
    clients: Clients, account: Account, cluster: str, moto: Moto
) -> None:
    """With DISABLE_DRY_RUN no launch call is dry-run and a denied account still validates."""
    moto.capacity.deny.update({"CreateFleet", "CreateLaunchTemplate", "RunInstances"})
    skipped = resolve.Resolver(clients, cluster, "1.31", dry_run=False)
    assert (await skipped.status(node_class(), NOW)).ready() == "True"
    calls = moto.capacity.calls
    assert (calls["CreateFleet"], calls["CreateLaunchTemplate"], calls["RunInstances"]) == (0, 0, 0)
