"""The disruption queue: validated commands in flight together, each until its replacements are up.

Upstream's orchestration queue, with its state kept in the cluster rather than only in memory
(``disruption_marks``). Starting a command:

1. Record: every candidate NodeClaim gets the ``karpenter.sh/disruption-command`` annotation and
   upstream's ``DisruptionReason`` condition.
2. Mark: the candidates' Nodes get ``karpenter.sh/disrupted:NoSchedule``. The core reads that
   taint as "in flight": such nodes are no candidates, count against the budgets, and their
   pods are rescheduled in every later what-if, so the next decision can start at once.
3. Replace: the replacements are created carrying ``karpenter.sh/disruption-replacement-of``.

``run`` then watches every command: once all its replacements are initialized the candidates'
NodeClaims are deleted (the termination finalizer drains them); a replacement that goes away
(launch failure, timeout) or a command older than ``replacement_timeout_s`` rolls back: taints
off, annotation and condition cleared, replacements not yet initialized deleted, and the
candidates held back from decisions for a doubling backoff. A restarted leader rebuilds the
queue before its first decision (``adopt``, rules in ``disruption_restart``).
"""

from __future__ import annotations

import uuid
from typing import Any

from karpenter.controllers import disruption_restart as restart
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.controllers.disruption_marks import REPLACEMENT_ANNOTATION, InFlight, Marks
from karpenter.controllers.launching import create_nodeclaim
from karpenter.core.disruption.commands import (
    METHOD_EMPTINESS,
    METHOD_MULTI,
    METHOD_REPACK,
    METHOD_SINGLE,
    Command,
)
from karpenter.core.model import labels as lbl
from karpenter.kube import errors

REPLACEMENT_TIMEOUT_S = 20 * 60.0  # beyond the lifecycle's own launch + registration timeouts
BACKOFF_BASE_S = 60.0
BACKOFF_MAX_S = 10 * 60.0
TICK_S = 1.0
# repack is multi-node consolidation with several replacements: upstream's "multi" label
CONSOLIDATION_TYPE = {
    METHOD_EMPTINESS: "empty",
    METHOD_MULTI: "multi",
    METHOD_REPACK: "multi",
    METHOD_SINGLE: "single",
}


class DisruptionQueue(Controller):
    """Commands in flight (leader only); ``held`` tells the decider which nodes to leave alone."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        replacement_timeout_s: float = REPLACEMENT_TIMEOUT_S,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
    ) -> None:
        super().__init__(ctx, "disruption.queue")
        self.replacement_timeout_s = replacement_timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.inflight: dict[str, InFlight] = {}
        self.executed: list[InFlight] = []  # completed, newest last (bounded; logs and tests)
        self.failed: list[InFlight] = []  # failed and rolled back, newest last (bounded)
        self.rolled_back: list[InFlight] = []  # every rollback, restarts' too (bounded)
        self.backoff: dict[str, tuple[float, float]] = {}  # node → (until, current delay)
        self.adopted = False
        self.marks = Marks(ctx)

    # ---- what the decider asks ----------------------------------------------------------------
    def held(self) -> dict[str, str]:
        """Nodes the next decision must leave alone, with the reason they are reported."""
        now = self.clock.now()
        out = {
            node: "BackingOff: a disruption command on this node failed recently"
            for node, (until, _) in self.backoff.items()
            if until > now
        }
        for cmd in self.inflight.values():
            for node in cmd.candidates.values():
                if node:
                    out[node] = f"Disrupting: command {cmd.id} is in flight"
        return out

    # ---- starting ---------------------------------------------------------------------------
    async def start(self, command: Command) -> InFlight | None:
        """Record, mark and launch ``command``; None when it could not start (rolled back)."""
        cmd = self._in_flight(command)
        busy = {n for other in self.inflight.values() for n in other.candidates}
        if not cmd.candidates or busy & set(cmd.candidates):
            return None
        log = self._log.bind(command=cmd.id, reason=cmd.reason, nodes=sorted(cmd.candidates))
        log.info(
            "disrupting",
            decision=cmd.decision,
            method=cmd.method,
            replacements=cmd.expected,
            savings_per_hour=round(command.savings, 4),
        )
        self.inflight[cmd.id] = cmd
        try:
            for claim in cmd.candidates:
                await self.marks.mark_claim(claim, cmd)
            for node in cmd.candidates.values():
                await self.marks.taint(node, add=True)
            if not await self._replace(cmd, command, log):
                await self._fail(cmd, "replacement could not be created")
                return None
        except (errors.ApiError, OSError) as err:
            await self._fail(cmd, f"starting the command failed: {err}")
            return None
        labels = (cmd.decision, cmd.reason.lower(), CONSOLIDATION_TYPE.get(cmd.method, ""))
        self.metrics.voluntary_disruption_decisions.labels(*labels).inc()
        return cmd

    async def expire(self, command: Command) -> InFlight:
        """Delete expired candidates at once: no record, no taint, no replacement (upstream's
        expiration controller; the provisioner finds room for the evicted pods)."""
        cmd = self._in_flight(command)
        self._log.info("expiring", command=cmd.id, nodes=sorted(cmd.candidates))
        await self._finish(cmd, tracked=False)
        labels = (cmd.decision, cmd.reason.lower(), "")
        self.metrics.voluntary_disruption_decisions.labels(*labels).inc()
        return cmd

    def _in_flight(self, command: Command) -> InFlight:
        return InFlight(
            uuid.uuid4().hex[:12],
            command.reason,
            command.method,
            command.decision,
            {
                c.state.claim.name: (c.state.node.name if c.state.node is not None else "")
                for c in command.candidates
                if c.state.claim is not None
            },
            len(command.replacements),
            self.clock.now(),
            command=command,
        )

    async def _replace(self, cmd: InFlight, command: Command, log: Any) -> bool:
        pools = {p.name: p for p in self.state.active_nodepools()}
        for claim in command.replacements:
            pool = pools.get(claim.nodepool)
            name = (
                ""
                if pool is None
                else await create_nodeclaim(
                    self.kube,
                    self.state,
                    self.metrics,
                    claim,
                    pool,
                    cmd.reason.lower(),
                    log,
                    annotations={REPLACEMENT_ANNOTATION: cmd.id},
                )
            )
            if not name:
                return False
            cmd.replacements.append(name)
        for candidate in cmd.candidates:
            await self.marks.event(
                candidate, "DisruptionLaunching", f"Launching NodeClaim: {cmd.reason}"
            )
        return True

    # ---- watching ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Adopt what a previous leader left, then watch every command forever."""
        while True:
            try:
                if not self.adopted:
                    await self.adopt()
                await self.reconcile()
            except (errors.ApiError, OSError) as err:
                self._log.warning("disruption queue pass failed", error=str(err))
            await self.clock.sleep(TICK_S)

    async def reconcile(self) -> None:
        """One look at every command in flight: finish, fail or keep waiting."""
        now = self.clock.now()
        for cmd in list(self.inflight.values()):
            if len(cmd.replacements) < cmd.expected:
                continue  # still being started (replacements not all created yet)
            claims = [self.state.nodeclaims.get(n) for n in cmd.replacements]
            gone = [
                n for n, c in zip(cmd.replacements, claims, strict=True) if c is None or c.deleting
            ]
            if gone:
                await self._fail(cmd, f"replacement went away: {', '.join(gone)}")
            elif all(c is not None and c.initialized for c in claims):
                await self._finish(cmd)
            elif now - cmd.started >= self.replacement_timeout_s:
                await self._fail(cmd, "replacements not initialized in time")

    async def _finish(self, cmd: InFlight, *, tracked: bool = True) -> None:
        for claim in cmd.candidates:
            await self._delete_candidate(claim, cmd)
        if tracked:
            del self.inflight[cmd.id]
        for node in cmd.candidates.values():
            self.backoff.pop(node, None)
        self.executed.append(cmd)
        del self.executed[:-100]
        self._log.info("command succeeded", command=cmd.id, nodes=sorted(cmd.candidates))

    async def _fail(self, cmd: InFlight, why: str) -> None:
        """Roll back a failed command (``_rollback``), count it and back its nodes off."""
        failed = await self._rollback(cmd, why)
        labels = (cmd.decision, cmd.reason.lower(), CONSOLIDATION_TYPE.get(cmd.method, ""))
        self.metrics.voluntary_disruption_queue_failures.labels(*labels).inc(max(failed, 1))
        now = self.clock.now()
        for node in cmd.candidates.values():
            _, delay = self.backoff.get(node, (0.0, self.backoff_base_s / 2))
            delay = min(delay * 2, self.backoff_max_s)
            self.backoff[node] = (now + delay, delay)
        self.failed.append(cmd)
        del self.failed[:-100]

    async def _rollback(self, cmd: InFlight, why: str) -> int:
        """Taints off, record cleared, replacements not initialized deleted; how many were."""
        self._log.warning("rolling back disruption command", command=cmd.id, why=why)
        failed = [n for n in cmd.replacements if not self._initialized(n)]
        for node in cmd.candidates.values():
            await self.marks.taint(node, add=False)
        for claim in cmd.candidates:
            await self.marks.unmark_claim(claim)
        for name in failed:
            await self.marks.delete(name)
        self.inflight.pop(cmd.id, None)
        self.rolled_back.append(cmd)
        del self.rolled_back[:-100]
        return len(failed)

    def _initialized(self, name: str) -> bool:
        claim = self.state.nodeclaims.get(name)
        return claim is not None and claim.initialized and not claim.deleting

    # ---- restart ------------------------------------------------------------------------------
    async def adopt(self) -> None:
        """Rebuild the queue from the cluster: resume or roll back each recorded command, then
        remove taints and conditions no command accounts for (``disruption_restart``)."""
        for adoption in restart.adoptions(self.state, self.clock.now()):
            cmd = adoption.command
            self.inflight[cmd.id] = cmd
            if not adoption.resume:
                await self._rollback(cmd, adoption.why)
                continue
            for node in cmd.candidates.values():
                await self.marks.taint(node, add=True)
            self._log.info(
                "adopted in-flight disruption command", command=cmd.id, nodes=sorted(cmd.candidates)
            )
        nodes = {n for cmd in self.inflight.values() for n in cmd.candidates.values()}
        for name in restart.stray_taints(self.state, nodes):
            self._log.info("removing a disrupted taint no command accounts for", node=name)
            await self.marks.taint(name, add=False)
        claims = {c for cmd in self.inflight.values() for c in cmd.candidates}
        for name in restart.stray_reasons(self.state, claims):
            await self.marks.clear_reason(name)
        self.adopted = True

    async def _delete_candidate(self, name: str, cmd: InFlight) -> None:
        await self.marks.event(name, "DisruptionTerminating", f"Disrupting NodeClaim: {cmd.reason}")
        claim = self.state.nodeclaims.get(name)
        if not await self.marks.delete(name) or claim is None:
            return
        pool = self.state.nodepools.get(claim.nodepool)
        policy = pool.disruption.consolidation_policy if pool is not None else ""
        grace = claim.termination_grace_seconds
        if grace is None and pool is not None:
            grace = pool.template.termination_grace_seconds
        self.metrics.nodeclaims_disrupted.labels(
            reason=cmd.reason.lower(),
            nodepool=claim.nodepool,
            capacity_type=claim.labels.get(lbl.CAPACITY_TYPE, ""),
            consolidation_policy=policy,
            termination_mode="graceful" if grace is None else "eventual",
        ).inc()
        self._log.info("deleted nodeclaim", command=cmd.id, nodeclaim=name)
