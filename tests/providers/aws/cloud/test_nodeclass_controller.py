"""The EC2NodeClass controller against moto: status, hash annotation, finalizer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.controllers.nodeclass import NodeClassController
from karpenter.providers.aws.core import hashmigration
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.builders import node_class
from tests.providers.aws.cloud.conftest import Account
from tests.providers.aws.cloud.fixtures import Env, claim, env, prices

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


class Claims:
    """NodeClaims of one class with their annotations; records annotation patches."""

    def __init__(self, claims: dict[str, NodeClaim], drifted: frozenset[str] = frozenset()):
        self.claims = claims
        self.drifted = drifted
        self.patches: list[tuple[str, dict[str, str]]] = []

    async def names_for_nodeclass(self, name: str) -> list[str]:
        return sorted(self.claims)

    async def claim_hashes(self, nodeclass: str) -> list[hashmigration.ClaimHash]:
        return [
            hashmigration.ClaimHash(n, c.annotations, n in self.drifted)
            for n, c in self.claims.items()
            if c.node_class_ref.name == nodeclass
        ]

    async def annotate(self, name: str, annotations: dict[str, str]) -> None:
        self.patches.append((name, annotations))
        c = self.claims[name]
        self.claims[name] = replace(c, annotations={**c.annotations, **annotations})


@pytest.mark.asyncio
async def test_hash_version_change_restamps_claims_instead_of_drifting(
    env: Env, account: Account
) -> None:
    """After a hash-version bump, claims get the current hash and are not NodeClass-drifted."""
    stale = {
        awslbl.ANNOTATION_NODECLASS_HASH: "stale",
        awslbl.ANNOTATION_NODECLASS_HASH_VERSION: "v5",
    }
    fresh = await env.provider.create(claim("default-1", "m5.large"))
    held = await env.provider.create(claim("default-2", "m5.large"))
    for launched in (fresh, held):
        # moto attaches the VPC default group instead of the template's (see test_gc_drift)
        await env.clients.ec2.modify_instance_attribute(
            InstanceId=launched.provider_id.rsplit("/", 1)[1], Groups=[account.security_group]
        )
    claims = Claims(
        {c.name: replace(c, annotations={**c.annotations, **stale}) for c in (fresh, held)},
        drifted=frozenset({"default-2"}),
    )
    cls = env.classes.items["default"]
    store = Store(replace(cls, annotations={**cls.annotations, **stale}))
    ctrl = NodeClassController(
        store,
        claims,
        env.resolver,
        env.provider.launch_templates,
        env.clock,
        hashes=claims,
        ca_bundle=env.provider.settings.CLUSTER_CA_BUNDLE,
    )
    result = await ctrl.reconcile("default")
    assert result.migrated_claims == ("default-1", "default-2")
    class_hash = store.items["default"].annotations[awslbl.ANNOTATION_NODECLASS_HASH]
    migrated = claims.claims["default-1"].annotations
    assert migrated[awslbl.ANNOTATION_NODECLASS_HASH] == class_hash
    assert migrated[awslbl.ANNOTATION_NODECLASS_HASH_VERSION] == "v6"
    assert await env.provider.is_drifted(claims.claims["default-1"]) == ""
    # an already-Drifted claim keeps its old hash, so it stays drifted under the new version
    kept = claims.claims["default-2"].annotations
    assert kept[awslbl.ANNOTATION_NODECLASS_HASH] == "stale"
    assert kept[awslbl.ANNOTATION_NODECLASS_HASH_VERSION] == "v6"
    assert await env.provider.is_drifted(claims.claims["default-2"]) == "NodeClassDrift"
    # the class is now on the current version: later reconciles leave the claims alone
    again = await ctrl.reconcile("default")
    assert again.migrated_claims == () and len(claims.patches) == 2
    # the re-stamped claim takes part in hash drift again: a static change now drifts it
    env.classes.put(replace(cls, spec=replace(cls.spec, user_data="#!/bin/bash\necho changed")))
    assert await env.provider.is_drifted(claims.claims["default-1"]) == "NodeClassDrift"
