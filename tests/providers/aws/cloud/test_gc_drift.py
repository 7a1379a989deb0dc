"""Garbage collection of leaked instances and cloud-side drift, against moto."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.controllers.gc import GarbageCollector
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.builders import Claims
from tests.providers.aws.cloud.conftest import Account, seed_ssm
from tests.providers.aws.cloud.fixtures import NOW, Env, claim, env, prices

__all__ = ("env", "prices")
TYPES = ("m5.large", "c5.large")


@pytest.mark.asyncio
async def test_gc_terminates_unowned_instances_after_grace(env: Env) -> None:
    """An instance without a NodeClaim is terminated (and its Node deleted) once 30s old."""
    owned = await env.provider.create(claim("default-1", *TYPES))
    leaked = await env.provider.create(claim("default-2", *TYPES))
    claims = Claims(owned)
    gc = GarbageCollector(env.provider, claims, env.clock)
    # the grace period counts from EC2's LaunchTime (moto stamps the real time)
    launched_at = {c.provider_id: c.creation for c in await env.provider.list()}
    env.clock.t = launched_at[leaked.provider_id] + 10
    assert await gc.reconcile() == ([], 10.0)
    env.clock.t = launched_at[leaked.provider_id] + 31
    collected, _ = await gc.reconcile()
    assert collected == [leaked.provider_id]
    assert claims.nodes_deleted == [leaked.provider_id]
    assert [c.provider_id for c in await env.provider.list()] == [owned.provider_id]
    assert (await gc.reconcile())[0] == []


@pytest.mark.asyncio
async def test_gc_ignores_other_clusters(env: Env, cluster: str) -> None:
    """Instances of another cluster (other eks:eks-cluster-name) are never listed."""
    await env.provider.create(claim("default-1", *TYPES))
    other = env.provider.settings.model_copy(update={"CLUSTER_NAME": f"{cluster}-other"})
    env.provider.settings = other
    env.provider.instances = type(env.provider.instances)(env.clients.ec2, other.CLUSTER_NAME)
    assert await env.provider.list() == []


async def launch(env: Env, account: Account) -> NodeClaim:
    """Launch, then give the instance the launch template's security groups.

    moto's CreateFleet ignores the security groups of a launch template (it reads a
    ``GroupSet`` key templates never have) and attaches the VPC default group; EC2 attaches the
    template's. ModifyInstanceAttribute puts the instance where EC2 would have.
    """
    launched = await env.provider.create(claim("default-1", *TYPES))
    await env.clients.ec2.modify_instance_attribute(
        InstanceId=launched.provider_id.rsplit("/", 1)[1], Groups=[account.security_group]
    )
    return launched


@pytest.mark.asyncio
async def test_no_drift_right_after_launch(env: Env, account: Account) -> None:
    """A fresh instance matches its NodeClass."""
    launched = await launch(env, account)
    assert await env.provider.is_drifted(launched) == ""


@pytest.mark.asyncio
async def test_ami_drift_when_alias_moves(env: Env, account: Account) -> None:
    """A new AMI behind al2023@latest: once the 24h SSM cache expires, the instance drifts."""
    launched = await launch(env, account)
    base = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended"
    seed_ssm(f"{base}/image_id", account.ami_custom)
    try:
        cls = env.classes.items["default"]
        cached = await env.resolver.status(cls, NOW + dt.timedelta(hours=23))
        assert {a.id for a in cached.amis} == {a.id for a in cls.status.amis}
        env.classes.put(
            replace(
                cls, status=await env.resolver.status(cls, NOW + dt.timedelta(days=1, seconds=1))
            )
        )
        assert await env.provider.is_drifted(launched) == "AMIDrift"
    finally:
        seed_ssm(f"{base}/image_id", account.ami_standard)


@pytest.mark.asyncio
async def test_security_group_and_subnet_drift(env: Env, account: Account) -> None:
    """Other security groups or subnets in status drift the instance."""
    launched = await launch(env, account)
    cls = env.classes.items["default"]
    moved = replace(cls.status, security_groups=(nc.SecurityGroup("sg-0123456789abcdef0"),))
    env.classes.put(replace(cls, status=moved))
    assert await env.provider.is_drifted(launched) == "SecurityGroupDrift"
    zone = launched.labels["topology.kubernetes.io/zone"]
    others = tuple(s for s in cls.status.subnets if s.zone != zone)
    env.classes.put(replace(cls, status=replace(cls.status, subnets=others)))
    assert await env.provider.is_drifted(launched) == "SubnetDrift"


@pytest.mark.asyncio
async def test_nodeclass_hash_drift(env: Env, account: Account) -> None:
    """Changing a static field (userData) drifts claims launched before the change."""
    launched = await launch(env, account)
    cls = env.classes.items["default"]
    env.classes.put(replace(cls, spec=replace(cls.spec, user_data="#!/bin/bash\necho changed")))
    assert await env.provider.is_drifted(launched) == "NodeClassDrift"
