"""The disruption controller: carry out the core's disruption commands, one at a time.

Every ``poll_s`` the leader takes a snapshot and asks the pure core (``planner.decide``, the
same code as ``karpenter simulate --disruption``) for the one command to start. Carrying it out
follows upstream's orchestration:

1. Validation (emptiness and consolidation only): wait ``validation_s`` and decide again; the
   command goes ahead only if the second decision names the same candidates with the same kind
   of outcome. Pods arriving, budgets changing or prices moving in between drop it.
2. Mark: the candidates' Nodes get ``karpenter.sh/disrupted:NoSchedule`` so nothing new lands
   on them (the solver and the kube-scheduler both respect it).
3. Replace: the command's replacement NodeClaims are created and awaited until initialized. A
   replacement that goes away (launch failure, timeout) rolls the command back: the taint comes
   off and the candidates stay. Replacements already up are left to a later consolidation.
4. Delete: the candidates' NodeClaims are deleted; the termination finalizer drains them.

Expiration deletes at once (no budgets, no pre-launched replacement), as upstream's expiration
controller does; the provisioner finds capacity for the evicted pods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread

from karpenter.controllers.context import Controller, ControllerContext
from karpenter.controllers.provisioner import create_nodeclaim, instance_types
from karpenter.core.disruption.candidates import Candidate, SurveyMemo
from karpenter.core.disruption.commands import (
    METHOD_EMPTINESS,
    METHOD_EXPIRATION,
    METHOD_MULTI,
    METHOD_SINGLE,
    Command,
)
from karpenter.core.disruption.planner import decide
from karpenter.core.model import labels as lbl
from karpenter.core.provisioning.build import Reuse
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, NODES, Obj

POLL_S = 10.0
VALIDATION_S = 15.0
QUIET_REFRESH_S = 60.0
REPLACEMENT_TIMEOUT_S = 20 * 60.0  # beyond the lifecycle's own launch + registration timeouts
_VALIDATED = frozenset({METHOD_EMPTINESS, METHOD_MULTI, METHOD_SINGLE})
_CONSOLIDATION_TYPE = {METHOD_EMPTINESS: "empty", METHOD_MULTI: "multi", METHOD_SINGLE: "single"}
_DISRUPTED_TAINT: Obj = {"key": lbl.TAINT_DISRUPTED, "effect": "NoSchedule"}


def _signature(command: Command) -> tuple[str, tuple[str, ...], int]:
    return command.method, tuple(sorted(command.names)), len(command.replacements)


class Disruption(Controller):
    """Decides with the core and orchestrates one command at a time (leader only)."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        poll_s: float = POLL_S,
        validation_s: float = VALIDATION_S,
        replacement_timeout_s: float = REPLACEMENT_TIMEOUT_S,
        quiet_refresh_s: float = QUIET_REFRESH_S,
    ) -> None:
        super().__init__(ctx, "disruption")
        self.poll_s = poll_s
        self.validation_s = validation_s
        self.replacement_timeout_s = replacement_timeout_s
        self.executed: list[Command] = []  # carried out, newest last (bounded; logs and tests)
        self.quiet_refresh_s = quiet_refresh_s
        self._quiet: tuple[int, float] | None = None  # (state version, when) of a quiet pass
        self._reuse = Reuse()
        self._memo = SurveyMemo()

    async def run(self) -> None:
        """Decide and act forever; a failed pass is logged and the next one starts afresh."""
        while True:
            try:
                await self.reconcile()
            except (errors.ApiError, OSError) as err:
                self._log.warning("disruption pass failed", error=str(err))
            await self.clock.sleep(self.poll_s)

    async def _decide(self) -> Command | None:
        pools = self.state.active_nodepools()
        types = await instance_types(
            self.cloud, self.state, pools, self.clock.now(), self.options, self._log
        )
        now = self.clock.now()
        cluster = self.state.snapshot(types, now)

        def run() -> Command | None:
            command, _ = decide(
                cluster, self.options, now, reuse=self._reuse, survey_memo=self._memo
            )
            return command

        return await anyio.to_thread.run_sync(run)

    async def reconcile(self) -> Command | None:
        """One pass: the command carried out, or None."""
        if not self.state.synced():
            return None  # a launch in flight changes what fits where; wait for it
        await self._untaint_stale()
        now = self.clock.now()
        if self._quiet is not None:
            version, since = self._quiet
            # Nothing changed since a pass found nothing: skip, but look again now and then
            # for what time alone changes (consolidateAfter elapsing, budget windows, expiry).
            if version == self.state.version and now - since < self.quiet_refresh_s:
                return None
        version = self.state.version
        command = await self._decide()
        if command is None:
            self._quiet = (version, now)
            return None
        self._quiet = None
        log = self._log.bind(
            reason=command.reason, method=command.method, nodes=list(command.names)
        )
        if command.method in _VALIDATED:
            await self.clock.sleep(self.validation_s)
            again = await self._decide() if self.state.synced() else None
            if again is None or _signature(again) != _signature(command):
                log.info("disruption command no longer valid after the validation wait")
                self.metrics.voluntary_disruption_validation_failures.labels(
                    consolidation_type=_CONSOLIDATION_TYPE[command.method]
                ).inc()
                return None
            command = again
        await self._execute(command, log)
        return command

    async def _execute(self, command: Command, log: Any) -> None:
        log.info(
            "disrupting",
            decision=command.decision,
            replacements=len(command.replacements),
            savings_per_hour=round(command.savings, 4),
        )
        if command.method != METHOD_EXPIRATION:
            for c in command.candidates:
                await self._taint(c, add=True)
            if command.replacements and not await self._replace(command, log):
                for c in command.candidates:
                    await self._taint(c, add=False)
                return
        for c in command.candidates:
            await self._delete(c, command, log)
        self.metrics.voluntary_disruption_decisions.labels(
            decision=command.decision,
            reason=command.reason.lower(),
            consolidation_type=_CONSOLIDATION_TYPE.get(command.method, ""),
        ).inc()
        self.executed.append(command)
        del self.executed[:-100]

    async def _replace(self, command: Command, log: Any) -> bool:
        """Create the replacements and wait until all are initialized; False to roll back."""
        pools = {p.name: p for p in self.state.active_nodepools()}
        names: list[str] = []
        for claim in command.replacements:
            pool = pools.get(claim.nodepool)
            name = (
                ""
                if pool is None
                else await create_nodeclaim(
                    self.kube, self.state, self.metrics, claim, pool, command.reason.lower(), log
                )
            )
            if not name:
                log.warning("replacement could not be created; rolling back")
                return False
            names.append(name)
        for c in command.candidates:
            await self._event(c, "DisruptionLaunching", f"Launching NodeClaim: {command.reason}")
        deadline = self.clock.now() + self.replacement_timeout_s
        while True:
            claims = [self.state.nodeclaims.get(n) for n in names]
            gone = [n for n, c in zip(names, claims, strict=True) if c is None or c.deleting]
            if gone:
                log.warning("replacement went away; rolling back", nodeclaims=gone)
                return False
            if all(c is not None and c.initialized for c in claims):
                log.info("replacements initialized", nodeclaims=names)
                return True
            if self.clock.now() >= deadline:
                log.warning("replacements not initialized in time; rolling back", nodeclaims=names)
                return False
            await self.clock.sleep(1.0)

    async def _untaint_stale(self) -> None:
        """Between passes no command is in flight, so a disrupted taint on a Node that is not
        going away is left over from a command cut short (a restart mid-command, as
        upstream's disruption controller clears on start): remove it."""
        for name, entry in sorted(self.state.nodes.entries.items()):
            raw = entry.raw
            if codec.meta(raw).get("deletionTimestamp") or not any(
                codec.same_taint(t, _DISRUPTED_TAINT) for t in codec.taints_of(raw)
            ):
                continue
            claims = [self.state.nodeclaims.get(c) for c in self.state.claims_of_node(name)]
            if any(c is not None and c.deleting for c in claims):
                continue
            self._log.info("removing a disrupted taint left by an interrupted command", node=name)
            await self._set_taint(name, add=False)

    async def _taint(self, c: Candidate, *, add: bool) -> None:
        node = c.state.node
        if node is not None:
            await self._set_taint(node.name, add=add)

    async def _set_taint(self, node: str, *, add: bool) -> None:
        """Add or remove the disrupted taint, with optimistic concurrency on the Node."""
        for _ in range(5):
            try:
                raw = await self.kube.get(NODES, node)
            except errors.NotFound:
                return
            taints = codec.taints_of(raw)
            if add:
                new = codec.merge_taints(taints, [_DISRUPTED_TAINT])
            else:
                new = [t for t in taints if not codec.same_taint(t, _DISRUPTED_TAINT)]
            if new == taints:
                return
            patch = {
                "metadata": {"resourceVersion": codec.meta(raw).get("resourceVersion")},
                "spec": {"taints": new},
            }
            try:
                obj = await self.kube.merge_patch(NODES, node, patch)
            except errors.Conflict:
                continue  # someone else wrote the Node; read it again
            self.state.nodes.upsert(obj)
            return

    async def _delete(self, c: Candidate, command: Command, log: Any) -> None:
        claim = c.state.claim
        if claim is None:
            return
        await self._event(c, "DisruptionTerminating", f"Disrupting NodeClaim: {command.reason}")
        try:
            await self.kube.delete(NODECLAIMS, claim.name)
        except errors.NotFound:
            return
        pool = c.nodepool
        self.metrics.nodeclaims_disrupted.labels(
            reason=command.reason.lower(),
            nodepool=pool.name,
            capacity_type=c.capacity_type,
            consolidation_policy=pool.disruption.consolidation_policy,
            termination_mode="graceful" if c.termination_grace is None else "eventual",
        ).inc()
        log.info("deleted nodeclaim", nodeclaim=claim.name)

    async def _event(self, c: Candidate, reason: str, message: str) -> None:
        targets: Sequence[Obj | None] = (
            self.state.nodes.raw(c.state.node.name) if c.state.node is not None else None,
            self.state.nodeclaims.raw(c.state.claim.name) if c.state.claim is not None else None,
        )
        for raw in targets:
            if raw is not None:
                await self.recorder.publish(
                    codec.object_reference(raw), events.NORMAL, reason, message
                )
