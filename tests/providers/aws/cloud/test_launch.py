"""AWSCloudProvider against moto: on-demand and spot launches, ICE fallback, batching, delete."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import replace
from typing import Any

import pytest

from karpenter.cloud.provider import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpenter.providers.aws.controllers import tagging
from karpenter.providers.aws.core import launch, userdata
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.conftest import Account, Moto
from tests.providers.aws.cloud.fixtures import NOW, Env, claim, env, prices

__all__ = ("env", "prices")

ON_DEMAND = ("m5.large", "c5.large", "m5.xlarge")
SAME_PODS = ("m5.large", "c5.large")  # 29 pods each: one launch template (LTs group by max pods)


async def describe(e: Env, provider_id: str) -> dict[str, Any]:
    out = await e.clients.ec2.describe_instances(InstanceIds=[provider_id.rsplit("/", 1)[1]])
    instance: dict[str, Any] = out["Reservations"][0]["Instances"][0]
    return instance


@pytest.mark.asyncio
async def test_on_demand_launch(env: Env, cluster: str, account: Account) -> None:
    """The cheapest on-demand type launches with tags, a named launch template and user data."""
    got = await env.provider.create(claim("default-1", *SAME_PODS))
    assert got.launched and got.provider_id.startswith("aws:///us-east-1")
    assert got.labels["node.kubernetes.io/instance-type"] == "c5.large"
    assert got.labels["karpenter.sh/capacity-type"] == "on-demand"
    assert got.labels["karpenter.k8s.aws/instance-family"] == "c5"
    assert got.labels["topology.k8s.aws/zone-id"].startswith("use1-az")
    assert got.capacity["pods"] == 29_000 and got.allocatable["cpu"] == 1930
    assert got.annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"] == "v6"
    raw = await describe(env, got.provider_id)
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert tags[f"kubernetes.io/cluster/{cluster}"] == "owned"
    assert tags["karpenter.sh/nodepool"] == "default"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert tags["eks:eks-cluster-name"] == cluster
    (name,) = env.provider.launch_templates.cached
    assert name.startswith("karpenter.k8s.aws/")
    versions = await env.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
    data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    text = base64.b64decode(data["UserData"]).decode()
    node_config = json.loads(text.split(userdata.NODEADM_MARKER, 1)[1].split("\n--//", 1)[0])
    assert node_config["spec"]["cluster"]["name"] == cluster
    assert node_config["spec"]["kubelet"]["config"]["maxPods"] == 29
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["NetworkInterfaces"][0]["Groups"] == [account.security_group]


@pytest.mark.asyncio
async def test_spot_launch(env: Env) -> None:
    """A claim allowing spot launches spot (price-capacity-optimized) when spot is offered."""
    got = await env.provider.create(claim("default-1", *ON_DEMAND, capacity="any"))
    assert got.labels["karpenter.sh/capacity-type"] == "spot"
    raw = await describe(env, got.provider_id)
    assert raw["InstanceLifecycle"] == "spot"


@pytest.mark.asyncio
async def test_ice_falls_to_next_pool_and_is_remembered(env: Env, moto: Moto) -> None:
    """ICE on the cheapest type: EC2 fills from the next, and the pool is hidden for 3 minutes."""
    moto.capacity.empty |= {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")}
    got = await env.provider.create(claim("default-1", *ON_DEMAND))
    assert got.labels["node.kubernetes.io/instance-type"] == "m5.large"
    now = env.clock()
    ice = env.provider.unavailable
    assert ice.is_unavailable("on-demand", "c5.large", "us-east-1a", now)
    assert not ice.is_unavailable("spot", "c5.large", "us-east-1a", now)
    # the next launch does not even ask for the ICE'd pools
    await env.provider.create(claim("default-2", *ON_DEMAND))
    assert moto.capacity.last_pools, "no CreateFleet seen"
    assert all(t != "c5.large" for t, _ in moto.capacity.last_pools)
    env.clock.t += 181
    catalog = {it.name: it for it in env.provider.catalog(env.classes.items["default"])}
    assert all(o.available for o in catalog["c5.large"].offerings if o.capacity_type == "on-demand")


@pytest.mark.asyncio
async def test_all_pools_ice_is_insufficient_capacity(env: Env, moto: Moto) -> None:
    """When every requested pool is out of capacity the claim fails with the pools named."""
    moto.capacity.empty |= {("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")}
    with pytest.raises(InsufficientCapacityError) as info:
        await env.provider.create(claim("default-1", "c5.large"))
    assert {(o.instance_type, o.zone) for o in info.value.offerings} == {
        ("c5.large", "us-east-1a"),
        ("c5.large", "us-east-1b"),
    }
    assert moto.capacity.fleet_calls == 1


@pytest.mark.asyncio
async def test_identical_launches_share_one_fleet_call(env: Env, moto: Moto) -> None:
    """Concurrent identical claims become one CreateFleet with capacity N, one instance each."""
    got = await asyncio.gather(
        *(env.provider.create(claim(f"default-{i}", *ON_DEMAND)) for i in range(3))
    )
    assert moto.capacity.fleet_calls == 1
    assert len({c.provider_id for c in got}) == 3


@pytest.mark.asyncio
async def test_get_list_delete(env: Env) -> None:
    """get/list see the instance; delete terminates it; afterwards it is NotFound."""
    got = await env.provider.create(claim("default-1", *ON_DEMAND))
    seen = await env.provider.get(got.provider_id)
    assert seen.labels["node.kubernetes.io/instance-type"] == "c5.large"
    assert [c.provider_id for c in await env.provider.list()] == [got.provider_id]
    await env.provider.delete(got)
    with pytest.raises(NodeClaimNotFoundError):
        await env.provider.get(got.provider_id)
    with pytest.raises(NodeClaimNotFoundError):
        await env.provider.delete(got)
    assert await env.provider.list() == []


@pytest.mark.asyncio
async def test_launch_templates_expire_and_nodeclass_cleanup(env: Env, cluster: str) -> None:
    """Unused templates are deleted from EC2 after a minute; a NodeClass's are deleted on demand."""
    await env.provider.create(claim("default-1", *SAME_PODS))
    lts = env.provider.launch_templates
    assert await lts.expire(env.clock() + 30) == []
    (name,) = await lts.expire(env.clock() + 61)
    out = await env.clients.ec2.describe_launch_templates(
        Filters=[{"Name": "tag:eks:eks-cluster-name", "Values": [cluster]}]
    )
    assert out["LaunchTemplates"] == []
    await env.provider.create(claim("default-2", *SAME_PODS))
    assert await lts.delete_for_nodeclass("default") == [name]


@pytest.mark.asyncio
async def test_not_ready_nodeclass(env: Env) -> None:
    """A missing NodeClass is insufficient capacity; an unready one is NodeClassNotReady."""
    missing = replace(claim(), node_class_ref=replace(claim().node_class_ref, name="nope"))
    with pytest.raises(InsufficientCapacityError, match="failed resolving NodeClass"):
        await env.provider.create(missing)
    cls = env.classes.items["default"]
    bad = nc.Condition(
        "SubnetsReady", "False", "SubnetsNotFound", "SubnetSelector did not match any Subnets"
    )
    env.classes.put(replace(cls, status=replace(cls.status, conditions=nc.with_ready((bad,)))))
    with pytest.raises(NodeClassNotReadyError, match="did not match any Subnets"):
        await env.provider.create(claim())


@pytest.mark.asyncio
async def test_launch_template_deleted_behind_our_back_is_recreated(env: Env) -> None:
    """A cached template deleted in EC2 fails CreateFleet once; it is recreated and retried."""
    await env.provider.create(claim("default-1", *SAME_PODS))
    (name,) = env.provider.launch_templates.cached
    await env.clients.ec2.delete_launch_template(LaunchTemplateName=name)
    got = await env.provider.create(claim("default-2", *SAME_PODS))
    assert got.launched
    out = await env.clients.ec2.describe_launch_templates(LaunchTemplateNames=[name])
    assert len(out["LaunchTemplates"]) == 1


@pytest.mark.asyncio
async def test_user_data_over_limit_is_a_create_error(env: Env) -> None:
    """User data above EC2's 16 KiB fails the launch with upstream's reason."""
    cls = env.classes.items["default"]
    env.classes.put(replace(cls, spec=replace(cls.spec, user_data="#" * 20000)))
    with pytest.raises(CreateError) as info:
        await env.provider.create(claim("default-1", *SAME_PODS))
    assert info.value.reason == "UserDataSizeLimitExceeded"


@pytest.mark.asyncio
async def test_tag_after_registration(env: Env, cluster: str) -> None:
    """Registration tagging adds Name, karpenter.sh/nodeclaim and the EKS cluster name."""
    got = await env.provider.create(claim("default-1", *SAME_PODS))
    await env.provider.tag_registered(got, "ip-10-0-0-1.ec2.internal")
    tags = {t["Key"]: t["Value"] for t in (await describe(env, got.provider_id))["Tags"]}
    assert tags["Name"] == "ip-10-0-0-1.ec2.internal"
    assert tags["karpenter.sh/nodeclaim"] == "default-1"
    seen = await env.provider.get(got.provider_id)
    assert seen.name == "default-1"


@pytest.mark.asyncio
async def test_launch_falls_to_next_types_when_a_whole_fleet_is_ice(env: Env, moto: Moto) -> None:
    """Every pool of the 60 cheapest types is out: a second fleet asks for the next ones."""
    cls = env.classes.items["default"]
    flexible = claim("default-1")
    first = launch.plan(flexible, env.provider.catalog(cls), cls.status.subnets, cls.status.amis)
    assert len(first.instance_types) == launch.MAX_INSTANCE_TYPES
    moto.capacity.empty |= {(o.instance_type, o.zone) for o in first.overrides}
    got = await env.provider.create(flexible)
    assert moto.capacity.fleet_calls == 2
    assert got.labels["node.kubernetes.io/instance-type"] not in first.instance_types


@pytest.mark.asyncio
async def test_full_subnet_is_skipped(env: Env, moto: Moto) -> None:
    """InsufficientFreeAddressesInSubnet hides the subnet (not the type) for the next launches."""
    pools = {("c5.large", "us-east-1a"), ("m5.large", "us-east-1a")}
    moto.capacity.empty |= pools
    moto.capacity.codes.update(dict.fromkeys(pools, "InsufficientFreeAddressesInSubnet"))
    got = await env.provider.create(claim("default-1", *SAME_PODS))
    assert got.labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert not env.provider.unavailable.is_unavailable(
        "on-demand", "c5.large", "us-east-1a", env.clock()
    )
    await env.provider.create(claim("default-2", *SAME_PODS))
    assert {z for _, z in moto.capacity.last_pools} == {"us-east-1b"}


@pytest.mark.asyncio
async def test_spot_service_linked_role_missing_falls_back_to_on_demand(
    env: Env, moto: Moto
) -> None:
    """The spot SLR error blacks out spot; a claim allowing on-demand then launches on-demand."""
    pools = {(t, z) for t in SAME_PODS for z in ("us-east-1a", "us-east-1b")}
    moto.capacity.empty |= pools
    moto.capacity.codes.update(
        dict.fromkeys(pools, "AuthFailure.ServiceLinkedRoleCreationNotPermitted")
    )
    first = await env.provider.create(claim("default-1", *SAME_PODS, capacity="any"))
    assert first.labels["karpenter.sh/capacity-type"] == "on-demand"
    assert env.provider.unavailable.is_unavailable("spot", "anything", "anywhere", env.clock())


@pytest.mark.asyncio
async def test_concurrent_gets_and_deletes_are_batched(env: Env, moto: Moto) -> None:
    """Concurrent gets become one DescribeInstances, concurrent deletes one TerminateInstances."""
    claims = await asyncio.gather(
        *(env.provider.create(claim(f"d-{i}", *SAME_PODS)) for i in range(3))
    )
    moto.capacity.calls.clear()
    await asyncio.gather(*(env.provider.get(c.provider_id) for c in claims))
    assert moto.capacity.calls["DescribeInstances"] == 1
    moto.capacity.calls.clear()
    await asyncio.gather(*(env.provider.delete(c) for c in claims))
    assert moto.capacity.calls["TerminateInstances"] == 1
    assert await env.provider.list() == []


@pytest.mark.asyncio
async def test_kubelet_max_pods_from_nodeclass(env: Env) -> None:
    """spec.kubelet.maxPods sets the pods capacity and the max pods in the user data."""
    cls = env.classes.items["default"]
    kubelet = replace(cls.spec.kubelet, max_pods=110)
    env.classes.put(replace(cls, spec=replace(cls.spec, kubelet=kubelet)))
    got = await env.provider.create(claim("default-1", *SAME_PODS))
    assert got.capacity["pods"] == 110_000
    (name,) = env.provider.launch_templates.cached
    versions = await env.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
    text = base64.b64decode(
        versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    ).decode()
    assert '"maxPods": 110' in text


@pytest.mark.asyncio
async def test_observed_node_memory_feeds_the_catalogue(env: Env) -> None:
    """A Node running a selected AMI teaches the real memory; others are ignored."""
    cls = env.classes.items["default"]
    got = await env.provider.create(claim("default-1", *SAME_PODS))
    name = got.labels["node.kubernetes.io/instance-type"]
    real = 3_700 * 2**20 * 1000
    env.provider.observe_node(cls, name, "ami-unknown", real - 1)
    env.provider.observe_node(cls, name, got.image_id, real)
    types = {it.name: it for it in env.provider.catalog(cls)}
    assert types[name].capacity["memory"] == real


@pytest.mark.asyncio
async def test_network_interfaces_and_prefixes_in_the_template(env: Env) -> None:
    """spec.networkInterfaces become the template's NICs; only EFA-capable types launch."""
    cls = env.classes.items["default"]
    nics = (nc.NetworkInterface(0, 0, "interface"), nc.NetworkInterface(1, 0, "efa-only"))
    env.classes.put(
        replace(cls, spec=replace(cls.spec, network_interfaces=nics, ip_prefix_count=2))
    )
    got = await env.provider.create(claim("default-1"))
    assert got.capacity["vpc.amazonaws.com/efa"] == 1000
    for name in env.provider.launch_templates.cached:  # one per max-pods group
        versions = await env.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
        data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        got_nics = [
            (n["NetworkCardIndex"], n["DeviceIndex"], n["InterfaceType"], n.get("Ipv4PrefixCount"))
            for n in data["NetworkInterfaces"]
        ]
        assert got_nics == [(0, 0, "interface", 2), (1, 0, "efa-only", None)]


@pytest.mark.asyncio
async def test_connection_tracking_needs_nitro(env: Env) -> None:
    """connectionTracking goes on the primary NIC, and only Nitro types may launch."""
    cls = env.classes.items["default"]
    ct = nc.ConnectionTracking(tcp_established_timeout=3600)
    env.classes.put(replace(cls, spec=replace(cls.spec, connection_tracking=ct)))
    with pytest.raises(InsufficientCapacityError):
        await env.provider.create(claim("default-1", "m4.large"))  # Xen
    got = await env.provider.create(claim("default-2", *SAME_PODS))
    assert got.labels["karpenter.k8s.aws/instance-hypervisor"] == "nitro"
    for name in env.provider.launch_templates.cached:
        versions = await env.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
        nic = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["NetworkInterfaces"][0]
        assert nic["ConnectionTrackingSpecification"] == {"TcpEstablishedTimeout": 3600}


@pytest.mark.asyncio
async def test_consecutive_launches_spread_over_subnets_by_inflight_ips(
    env: Env, cluster: str
) -> None:
    """Two equal subnets in a zone: the second launch goes to the subnet the first did not use."""
    ec2 = env.clients.ec2
    vpc = (await ec2.create_vpc(CidrBlock="10.77.0.0/16"))["Vpc"]["VpcId"]
    ids = []
    for cidr in ("10.77.1.0/26", "10.77.2.0/26"):
        sub = await ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone="us-east-1c")
        ids.append(sub["Subnet"]["SubnetId"])
    await ec2.create_tags(Resources=ids, Tags=[{"Key": "ips-test", "Value": cluster}])
    cls = env.classes.items["default"]
    term = nc.SelectorTerm(tags={"ips-test": cluster})
    cls = replace(cls, spec=replace(cls.spec, subnet_selector_terms=(term,)))
    env.classes.put(replace(cls, status=await env.resolver.status(cls, NOW)))
    first = await env.provider.create(claim("default-1", *SAME_PODS))
    second = await env.provider.create(claim("default-2", *SAME_PODS))
    subnets = {(await describe(env, c.provider_id))["SubnetId"] for c in (first, second)}
    assert subnets == set(ids)


class Annotations:
    def __init__(self) -> None:
        self.items: dict[str, dict[str, str]] = {}

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        self.items.setdefault(name, {}).update(annotations)


@pytest.mark.asyncio
async def test_tagging_controller_tags_registered_claims_once(env: Env) -> None:
    """A registered claim's instance is tagged and the claim annotated; then nothing more."""
    got = await env.provider.create(claim("default-1", *SAME_PODS))
    notes = Annotations()
    assert not await tagging.reconcile(got, env.provider, notes)  # not registered yet
    registered = replace(got, registered=True, node_name="ip-10-0-0-9.ec2.internal")
    assert await tagging.reconcile(registered, env.provider, notes)
    assert notes.items["default-1"]["karpenter.k8s.aws/tagged"] == "true"
    tags = {t["Key"]: t["Value"] for t in (await describe(env, got.provider_id))["Tags"]}
    assert tags["Name"] == "ip-10-0-0-9.ec2.internal"
    done = replace(registered, annotations={**registered.annotations, **notes.items["default-1"]})
    assert not await tagging.reconcile(done, env.provider, notes)
