"""The EC2NodeClass controller against moto: status, hash annotation, finalizer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from karpenter.controllers.aws_nodeclass import NodeClassController
from karpenter.core.aws import nodeclass as nc
from tests.cloud.aws.builders import node_class
from tests.cloud.aws.fixtures import Env, claim, env, prices

__all__ = ("env", "prices")


class Store:
    def __init__(self, *items: nc.EC2NodeClass) -> None:
        self.items = {i.name: i for i in items}
        self.finalizers: dict[str, bool] = {}
        self.patches = 0

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        return self.items.get(name)

    async def patch(
        self, name: str, status: nc.Status, annotations: dict[str, str], finalizer: bool
    ) -> None:
        self.patches += 1
        self.items[name] = replace(self.items[name], status=status, annotations=annotations)
        self.finalizers[name] = finalizer


class Index:
    def __init__(self) -> None:
        self.by_class: dict[str, list[str]] = {}

    async def names_for_nodeclass(self, name: str) -> list[str]:
        return self.by_class.get(name, [])


@pytest.mark.asyncio
async def test_reconcile_resolves_status_and_hash(env: Env) -> None:
    """A new class gets a Ready status, the hash annotations and the finalizer; no-op next time."""
    store, index = Store(node_class("web")), Index()
    ctrl = NodeClassController(store, index, env.resolver, env.provider.launch_templates, env.clock)
    result = await ctrl.reconcile("web")
    got = store.items["web"]
    assert result.requeue_after == 60.0
    assert got.status.ready() == "True"
    assert got.annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"] == "v6"
    assert store.finalizers["web"] is True
    await ctrl.reconcile("web")
    assert store.patches == 1


@pytest.mark.asyncio
async def test_finalizer_waits_for_claims_then_cleans_up(env: Env) -> None:
    """Deletion waits on NodeClaims, then deletes launch templates and the managed profile."""
    await env.provider.create(claim("default-1", "m5.large", "c5.large"))
    cls = env.classes.items["default"]
    store, index = Store(replace(cls, deleting=True)), Index()
    index.by_class["default"] = ["default-1"]
    ctrl = NodeClassController(store, index, env.resolver, env.provider.launch_templates, env.clock)
    waiting = await ctrl.reconcile("default")
    assert waiting.waiting_on == ("default-1",) and waiting.requeue_after == 600.0
    index.by_class["default"] = []
    done = await ctrl.reconcile("default")
    assert len(done.deleted_templates) == 1
    assert store.finalizers["default"] is False
    profiles = await env.clients.iam.list_instance_profiles()
    assert cls.status.instance_profile not in {
        p["InstanceProfileName"] for p in profiles["InstanceProfiles"]
    }
