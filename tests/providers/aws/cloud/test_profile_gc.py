"""Instance-profile GC against moto: unreferenced managed profiles go after an hour."""

from __future__ import annotations

import pytest

from karpenter.providers.aws.controllers.profile_gc import ProfileCollector
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.builders import Clock, node_class
from tests.providers.aws.cloud.fixtures import Env, env, prices

__all__ = ("env", "prices")


class Refs:
    def __init__(self, *names: str) -> None:
        self.names = set(names)

    async def referenced_profiles(self) -> set[str]:
        return self.names


@pytest.mark.asyncio
async def test_unreferenced_profiles_are_deleted_after_protection(env: Env, cluster: str) -> None:
    """A profile no class or claim names is deleted once older than an hour; others stay."""
    used = env.classes.items["default"].status.instance_profile
    other = await env.resolver.instance_profile(node_class("old", role="KarpenterNodeRole-demo"))
    assert isinstance(env.classes.items["default"], nc.EC2NodeClass)
    got = await env.clients.iam.get_instance_profile(InstanceProfileName=other)
    clock = Clock(got["InstanceProfile"]["CreateDate"].timestamp())  # moto stamps real time
    gc = ProfileCollector(env.clients.iam, "us-east-1", cluster, Refs(used), clock)
    assert (await gc.reconcile())[0] == []  # both younger than an hour
    clock.t += 2 * 3600
    deleted, period = await gc.reconcile()
    assert deleted == [other] and period == 1800.0
    names = {
        p["InstanceProfileName"]
        for p in (await env.clients.iam.list_instance_profiles())["InstanceProfiles"]
    }
    assert used in names and other not in names
