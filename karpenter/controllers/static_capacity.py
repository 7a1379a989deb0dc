"""Static NodePools (feature gate ``StaticCapacity``): keep exactly ``spec.replicas`` nodes.

A NodePool with ``replicas`` is not provisioned for pods and not consolidated; this loop holds
its NodeClaim count at ``replicas``, as upstream's ``static.provisioning`` and
``static.deprovisioning`` do:

- Too few: create the missing NodeClaims from the template (its requirements as they are, no
  requests: the provider picks the instance type), never past ``limits.nodes``.
- Too many (replicas lowered): delete the extras, the ones not launched yet first, then the
  emptiest (fewest pods that are not DaemonSet pods), then the newest.

Claims being deleted do not count, so a drifted or expired node deleted elsewhere is replaced
here. The pass runs on NodePool and NodeClaim changes and every minute.
"""

from __future__ import annotations

import anyio

from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.scheduling.requirements import RequirementError, from_selector_terms
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS, Obj

INTERVAL_S = 60.0


class StaticCapacity(Controller):
    """Holds every static NodePool at its replica count (leader only)."""

    def __init__(self, ctx: ControllerContext, *, interval_s: float = INTERVAL_S) -> None:
        super().__init__(ctx, "static.provisioning")
        self.interval_s = interval_s
        self._changed = anyio.Event()

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind in ("NodePool", "NodeClaim"):
            self._changed.set()

    async def run(self) -> None:
        """Reconcile forever."""
        self.state.subscribe(self._on_change)
        while True:
            self._changed = anyio.Event()
            for pool in self.state.active_nodepools():
                if pool.replicas is None:
                    continue
                try:
                    await self.reconcile(pool)
                except (errors.ApiError, OSError) as err:
                    self._log.warning("static pass failed", nodepool=pool.name, error=str(err))
            with anyio.move_on_after(self.interval_s):
                await self._changed.wait()

    def _claims(self, pool: str) -> list[NodeClaim]:
        return [c for c in self.state.nodeclaims.values() if c.nodepool == pool and not c.deleting]

    async def reconcile(self, pool: NodePool) -> int:
        """One pass over one static pool: NodeClaims created (+) or deleted (-)."""
        replicas = pool.replicas or 0
        claims = self._claims(pool.name)
        if len(claims) < replicas:
            return await self._scale_up(pool, replicas - len(claims), len(claims))
        if len(claims) > replicas:
            return -await self._scale_down(claims, len(claims) - replicas)
        return 0

    async def _scale_up(self, pool: NodePool, missing: int, have: int) -> int:
        limit = (pool.limits or {}).get("nodes")
        if limit is not None:
            # limits are milli-units in the core; never create past limits.nodes
            missing = min(missing, max(limit // 1000 - have, 0))
        pool_obj = self.state.nodepools.raw(pool.name)
        if missing <= 0 or pool_obj is None:
            return 0
        try:
            reqs = from_selector_terms(pool.template.requirements)
        except RequirementError as err:
            self._log.warning("bad static requirements", nodepool=pool.name, error=str(err))
            return 0
        created = 0
        for _ in range(missing):
            body = codec.claim_manifest(pool, pool_obj, reqs, {})
            obj = await self.kube.create(NODECLAIMS, body)
            self.state.nodeclaims.upsert(obj)
            self.metrics.nodeclaims_created.labels(
                reason="static", nodepool=pool.name, min_values_relaxed="false"
            ).inc()
            created += 1
        self._log.info("static nodeclaims created", nodepool=pool.name, count=created)
        return created

    def _pods_on(self, claim: NodeClaim) -> int:
        if not claim.node_name:
            return 0
        return sum(
            1
            for p in self.state.pods_on(claim.node_name)
            if not p.is_daemonset_pod() and p.is_active()
        )

    async def _scale_down(self, claims: list[NodeClaim], extra: int) -> int:
        order = sorted(claims, key=lambda c: (c.launched, self._pods_on(c), -c.creation, c.name))
        deleted = 0
        for claim in order[:extra]:
            try:
                await self.kube.delete(NODECLAIMS, claim.name)
            except errors.NotFound:
                continue
            deleted += 1
        self._log.info("static nodeclaims deleted", count=deleted)
        return deleted
