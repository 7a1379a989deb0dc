"""EC2NodeClass controller: resolve status, keep the hash annotation, finalize on deletion.

When the class's hash version is not the current one, its NodeClaims are re-stamped first
(``hash_migration``), so they are not all reported drifted by a changed hash function.

Reconcile order follows upstream: add the finalizer, resolve AMIs, the placement group,
subnets, security groups and the instance profile into ``status`` with conditions, then patch
once (unchanged status is not written). Deletion waits for the class's NodeClaims, then
deletes its launch templates and its managed instance profile (kept in isolated VPCs, as
upstream) and drops the finalizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from karpenter.providers.aws.cloud import errors, resolve
from karpenter.providers.aws.cloud.launchtemplates import LaunchTemplates
from karpenter.providers.aws.controllers import hash_migration
from karpenter.providers.aws.core import hashmigration, reservations
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import nodeclass as nc

REQUEUE_SECONDS = 60.0  # min of upstream's AMI 5m, subnets 1m, SGs 5m, ODCRs 1m, validation 10m
WAIT_FOR_CLAIMS_SECONDS = 600.0


class NodeClassStore(Protocol):
    """Reads and writes EC2NodeClasses."""

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        """The class, or None."""
        ...

    async def patch(
        self, name: str, status: nc.Status, annotations: dict[str, str], finalizer: bool
    ) -> None:
        """Write status, annotations and whether the finalizer is present (one patch)."""
        ...


class NodeClaimIndex(Protocol):
    """NodeClaims by the NodeClass they reference."""

    async def names_for_nodeclass(self, name: str) -> list[str]:
        """Names of the claims using this class."""
        ...


@dataclass
class Result:
    """What one reconcile did."""

    requeue_after: float
    waiting_on: tuple[str, ...] = ()
    deleted_templates: tuple[str, ...] = ()
    migrated_claims: tuple[str, ...] = ()


class NodeClassController:
    """Reconciles one EC2NodeClass at a time."""

    def __init__(
        self,
        store: NodeClassStore,
        claims: NodeClaimIndex,
        resolver: resolve.Resolver,
        templates: LaunchTemplates,
        now: Callable[[], float],
        isolated_vpc: bool = False,
        log: Any = None,
        *,
        hashes: hash_migration.ClaimHashes | None = None,
        ca_bundle: str = "",
    ) -> None:
        self.store = store
        self.claims = claims
        self.resolver = resolver
        self.templates = templates
        self.now = now
        self.isolated_vpc = isolated_vpc
        self.log = log or structlog.get_logger().bind(controller="nodeclass")
        self.hashes = hashes
        # the provider hashes with the cluster CA for drift; the claims must match it
        self.ca_bundle = ca_bundle

    async def reconcile(self, name: str) -> Result:
        """One pass; returns when to come back."""
        node_class = await self.store.get(name)
        if node_class is None:
            return Result(0.0)
        if node_class.deleting:
            return await self._finalize(node_class)
        when = datetime.fromtimestamp(self.now(), UTC)
        status = await self.resolver.status(node_class, when)
        class_hash = nc.static_hash(node_class, self.ca_bundle)
        migrated: tuple[str, ...] = ()
        if self.hashes is not None and hashmigration.class_needs_migration(node_class.annotations):
            migrated = await hash_migration.migrate(self.hashes, name, class_hash)
        annotations = {
            **node_class.annotations,
            awslbl.ANNOTATION_NODECLASS_HASH: class_hash,
            awslbl.ANNOTATION_NODECLASS_HASH_VERSION: awslbl.NODECLASS_HASH_VERSION,
        }
        if status != node_class.status or annotations != dict(node_class.annotations):
            await self.store.patch(name, status, annotations, True)
        soon = reservations.next_transition(status.capacity_reservations, self.now())
        wait = min(REQUEUE_SECONDS, soon) if soon is not None else REQUEUE_SECONDS
        return Result(wait, migrated_claims=migrated)

    async def _finalize(self, node_class: nc.EC2NodeClass) -> Result:
        waiting = tuple(sorted(await self.claims.names_for_nodeclass(node_class.name)))
        if waiting:
            self.log.info("waiting on nodeclaim termination", nodeclaims=", ".join(waiting))
            return Result(WAIT_FOR_CLAIMS_SECONDS, waiting)
        deleted = tuple(await self.templates.delete_for_nodeclass(node_class.name))
        if node_class.spec.role and not self.isolated_vpc and node_class.status.instance_profile:
            await self._delete_profile(node_class.status.instance_profile)
        await self.store.patch(
            node_class.name, node_class.status, dict(node_class.annotations), False
        )
        return Result(0.0, (), deleted)

    async def _delete_profile(self, name: str) -> None:
        iam = self.resolver.clients.iam
        try:
            out = await iam.get_instance_profile(InstanceProfileName=name)
            for role in out["InstanceProfile"].get("Roles", []):
                await iam.remove_role_from_instance_profile(
                    InstanceProfileName=name, RoleName=role["RoleName"]
                )
            await iam.delete_instance_profile(InstanceProfileName=name)
        except Exception as err:
            if not errors.is_not_found(err):
                raise
