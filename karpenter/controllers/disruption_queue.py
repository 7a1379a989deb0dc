"""The disruption queue: validated commands in flight together, each until its replacements are up.

Upstream's orchestration queue, kept in the cluster rather than in memory. Starting a command:

1. Record: every candidate NodeClaim gets the ``karpenter.sh/disruption-command`` annotation (the
   command's id, reason, method, decision, replacement count and start time) and upstream's
   ``DisruptionReason`` condition.
2. Mark: the candidates' Nodes get ``karpenter.sh/disrupted:NoSchedule``. The core reads that
   taint as "in flight": such nodes are no candidates, count against the budgets, and their
   pods are rescheduled in every later what-if, so the next decision can start at once.
3. Replace: the replacements are created carrying ``karpenter.sh/disruption-replacement-of``.

``run`` then watches every command: once all its replacements are initialized the candidates'
NodeClaims are deleted (the termination finalizer drains them); a replacement that goes away
(launch failure, timeout) or a command older than ``replacement_timeout_s`` rolls back: taints
off, annotation and condition cleared, replacements not yet initialized deleted, and the
candidates held back from decisions for a doubling backoff. A restarted leader rebuilds the
queue from those annotations before its first decision (``adopt``): a command whose
replacements all exist goes on waiting where it left off, one interrupted before they existed
rolls back, and a disrupted taint no command accounts for is removed (as upstream does).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.controllers.launching import create_nodeclaim
from karpenter.core.disruption.commands import (
    METHOD_EMPTINESS,
    METHOD_MULTI,
    METHOD_SINGLE,
    Command,
)
from karpenter.core.model import labels as lbl
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, NODES, Obj

COMMAND_ANNOTATION = "karpenter.sh/disruption-command"
REPLACEMENT_ANNOTATION = "karpenter.sh/disruption-replacement-of"
DISRUPTION_REASON = "DisruptionReason"
DISRUPTED_TAINT: Obj = {"key": lbl.TAINT_DISRUPTED, "effect": "NoSchedule"}
REPLACEMENT_TIMEOUT_S = 20 * 60.0  # beyond the lifecycle's own launch + registration timeouts
BACKOFF_BASE_S = 60.0
BACKOFF_MAX_S = 10 * 60.0
TICK_S = 1.0
CONSOLIDATION_TYPE = {METHOD_EMPTINESS: "empty", METHOD_MULTI: "multi", METHOD_SINGLE: "single"}


@dataclass(slots=True)
class InFlight:
    """One command being carried out (``command`` is None when adopted after a restart)."""

    id: str
    reason: str
    method: str
    decision: str
    candidates: dict[str, str]  # NodeClaim name → Node name ("" before registration)
    expected: int
    started: float
    replacements: list[str] = field(default_factory=list)
    command: Command | None = None

    def record(self) -> str:
        """The annotation value that lets a restarted controller carry on."""
        body = {
            "id": self.id,
            "reason": self.reason,
            "method": self.method,
            "decision": self.decision,
            "replacements": self.expected,
            "started": self.started,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _parse(text: str) -> dict[str, Any] | None:
    try:
        body = json.loads(text)
    except ValueError:
        return None
    return body if isinstance(body, dict) and isinstance(body.get("id"), str) else None


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
        self.failed: list[InFlight] = []  # rolled back, newest last (bounded)
        self.backoff: dict[str, tuple[float, float]] = {}  # node → (until, current delay)
        self.adopted = False

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
                await self._mark_claim(claim, cmd)
            for node in cmd.candidates.values():
                await self._taint(node, add=True)
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
            await self._event(
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
        """Roll back: taints off, record cleared, unfinished replacements deleted, backoff."""
        self._log.warning("rolling back disruption command", command=cmd.id, why=why)
        failed = [n for n in cmd.replacements if not self._initialized(n)]
        for node in cmd.candidates.values():
            await self._taint(node, add=False)
        for claim in cmd.candidates:
            await self._unmark_claim(claim)
        for name in failed:
            await self._delete(name)
        labels = (cmd.decision, cmd.reason.lower(), CONSOLIDATION_TYPE.get(cmd.method, ""))
        self.metrics.voluntary_disruption_queue_failures.labels(*labels).inc(max(len(failed), 1))
        now = self.clock.now()
        for node in cmd.candidates.values():
            _, delay = self.backoff.get(node, (0.0, self.backoff_base_s / 2))
            delay = min(delay * 2, self.backoff_max_s)
            self.backoff[node] = (now + delay, delay)
        self.inflight.pop(cmd.id, None)
        self.failed.append(cmd)
        del self.failed[:-100]

    def _initialized(self, name: str) -> bool:
        claim = self.state.nodeclaims.get(name)
        return claim is not None and claim.initialized and not claim.deleting

    # ---- restart ------------------------------------------------------------------------------
    async def adopt(self) -> None:
        """Rebuild the queue from the cluster: resume, roll back, or untaint (see module doc)."""
        records: dict[str, dict[str, Any]] = {}
        members: dict[str, dict[str, str]] = {}
        replacements: dict[str, list[str]] = {}
        for name in sorted(self.state.nodeclaims.entries):
            raw = self.state.nodeclaims.raw(name)
            claim = self.state.nodeclaims.get(name)
            if raw is None or claim is None:
                continue
            notes = codec.meta(raw).get("annotations") or {}
            if REPLACEMENT_ANNOTATION in notes and not claim.deleting:
                replacements.setdefault(str(notes[REPLACEMENT_ANNOTATION]), []).append(name)
            body = _parse(str(notes.get(COMMAND_ANNOTATION, "")))
            if body is not None and not claim.deleting:
                records.setdefault(body["id"], body)
                members.setdefault(body["id"], {})[name] = claim.node_name
        for cid in sorted(records):
            await self._adopt_one(records[cid], members[cid], replacements.get(cid, []))
        await self._untaint_strays()
        self.adopted = True

    async def _adopt_one(
        self, body: dict[str, Any], candidates: dict[str, str], made: list[str]
    ) -> None:
        cmd = InFlight(
            body["id"],
            str(body.get("reason", "")),
            str(body.get("method", "")),
            str(body.get("decision", "")),
            candidates,
            int(body.get("replacements", 0)),
            float(body.get("started", self.clock.now())),
            sorted(made),
        )
        self.inflight[cmd.id] = cmd
        if len(made) != cmd.expected:
            await self._fail(cmd, "interrupted before its replacements existed")
            return
        for node in candidates.values():
            await self._taint(node, add=True)
        self._log.info(
            "adopted in-flight disruption command", command=cmd.id, nodes=sorted(candidates)
        )

    async def _untaint_strays(self) -> None:
        held = {n for cmd in self.inflight.values() for n in cmd.candidates.values()}
        for name in sorted(self.state.nodes.entries):
            raw = self.state.nodes.raw(name)
            if raw is None or name in held or codec.meta(raw).get("deletionTimestamp"):
                continue
            if not any(codec.same_taint(t, DISRUPTED_TAINT) for t in codec.taints_of(raw)):
                continue
            claims = [self.state.nodeclaims.get(c) for c in self.state.claims_of_node(name)]
            if any(c is not None and c.deleting for c in claims):
                continue  # termination taints it too
            self._log.info("removing a disrupted taint no command accounts for", node=name)
            await self._taint(name, add=False)

    # ---- writes -------------------------------------------------------------------------------
    async def _mark_claim(self, name: str, cmd: InFlight) -> None:
        patch = {"metadata": {"annotations": {COMMAND_ANNOTATION: cmd.record()}}}
        self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))
        await self._condition(
            name,
            lambda conds: codec.set_condition(
                conds, DISRUPTION_REASON, "True", cmd.reason, cmd.reason, self.clock.now()
            ),
        )

    async def _unmark_claim(self, name: str) -> None:
        patch = {"metadata": {"annotations": {COMMAND_ANNOTATION: None}}}
        try:
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))
        except errors.NotFound:
            return

        def clear(conds: list[Obj]) -> bool:
            kept = [c for c in conds if c.get("type") != DISRUPTION_REASON]
            changed = len(kept) != len(conds)
            conds[:] = kept
            return changed

        await self._condition(name, clear)

    async def _condition(self, name: str, change: conditions.Change) -> None:
        """Change a claim's conditions with optimistic concurrency, re-reading on conflict."""
        obj = await conditions.update(self.kube, NODECLAIMS, name, change)
        if obj is not None:
            self.state.nodeclaims.upsert(obj)

    async def _taint(self, node: str, *, add: bool) -> None:
        """Add or remove the disrupted taint, with optimistic concurrency on the Node."""
        if not node:
            return
        for _ in range(5):
            try:
                raw = await self.kube.get(NODES, node)
            except errors.NotFound:
                return
            taints = codec.taints_of(raw)
            if add:
                new = codec.merge_taints(taints, [DISRUPTED_TAINT])
            else:
                new = [t for t in taints if not codec.same_taint(t, DISRUPTED_TAINT)]
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

    async def _delete_candidate(self, name: str, cmd: InFlight) -> None:
        await self._event(name, "DisruptionTerminating", f"Disrupting NodeClaim: {cmd.reason}")
        claim = self.state.nodeclaims.get(name)
        if not await self._delete(name) or claim is None:
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

    async def _delete(self, name: str) -> bool:
        try:
            await self.kube.delete(NODECLAIMS, name)
        except errors.NotFound:
            return False
        return True

    async def _event(self, claim: str, reason: str, message: str) -> None:
        raw_claim = self.state.nodeclaims.raw(claim)
        current = self.state.nodeclaims.get(claim)
        targets: Sequence[Obj | None] = (
            self.state.nodes.raw(current.node_name) if current and current.node_name else None,
            raw_claim,
        )
        for raw in targets:
            if raw is not None:
                await self.recorder.publish(
                    codec.object_reference(raw), events.NORMAL, reason, message
                )
