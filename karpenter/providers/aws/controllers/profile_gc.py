"""Instance-profile garbage collection: delete managed profiles nothing references any more.

Profiles Karpenter created live under ``/karpenter/<region>/<cluster>/``. One is kept while any
EC2NodeClass status or NodeClaim annotation names it, or while it is protected (created or
replaced within the last hour, so a status patch that lost a race cannot orphan a profile in
use). Upstream runs this every 30 minutes, and never in an isolated VPC.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog

from karpenter.providers.aws.cloud import errors
from karpenter.providers.aws.cloud.clients import Client

PERIOD_SECONDS = 30 * 60.0
PROTECTION_SECONDS = 3600.0


class References(Protocol):
    """Profile names in use: EC2NodeClass status and NodeClaim annotations."""

    async def referenced_profiles(self) -> set[str]:
        """Every profile name referenced by the cluster."""
        ...


class ProfileCollector:
    """Deletes unreferenced managed instance profiles."""

    def __init__(
        self,
        iam: Client,
        region: str,
        cluster: str,
        refs: References,
        now: Callable[[], float],
        log: Any = None,
    ) -> None:
        self.iam = iam
        self.prefix = f"/karpenter/{region}/{cluster}/"
        self.refs = refs
        self.now = now
        self.log = log or structlog.get_logger().bind(
            controller="instanceprofile.garbagecollection"
        )

    async def reconcile(self) -> tuple[list[str], float]:
        """Collect once; returns (deleted names, seconds until the next run)."""
        used = await self.refs.referenced_profiles()
        now = self.now()
        deleted = []
        pages = self.iam.get_paginator("list_instance_profiles").paginate(PathPrefix=self.prefix)
        async for page in pages:
            for profile in page.get("InstanceProfiles", []):
                # checked again here: deleting another cluster's profile must be impossible
                if not str(profile.get("Path", "")).startswith(self.prefix):
                    continue
                name = str(profile["InstanceProfileName"])
                created = profile.get("CreateDate")
                young = created is not None and now - created.timestamp() < PROTECTION_SECONDS
                if name in used or young:
                    continue
                await self._delete(name, [r["RoleName"] for r in profile.get("Roles", [])])
                deleted.append(name)
        return sorted(deleted), PERIOD_SECONDS

    async def _delete(self, name: str, roles: list[str]) -> None:
        try:
            for role in roles:
                await self.iam.remove_role_from_instance_profile(
                    InstanceProfileName=name, RoleName=role
                )
            await self.iam.delete_instance_profile(InstanceProfileName=name)
        except Exception as err:
            if not errors.is_not_found(err):
                raise
        self.log.info("deleted unreferenced instance profile", profile=name)
