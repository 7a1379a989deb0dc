"""The marks a disruption command leaves in the cluster, and the writes that put them there.

A command in flight is recorded on each candidate NodeClaim (the ``karpenter.sh/disruption-command``
annotation: id, reason, method, decision, replacement count, start time; upstream's
``DisruptionReason`` condition), its candidates' Nodes carry ``karpenter.sh/disrupted:NoSchedule``,
and its replacements carry ``karpenter.sh/disruption-replacement-of: <id>``. Those marks are all a
restarted controller has to go on (``disruption_restart``), so ``InFlight.record`` and ``parse``
are the one place their format lives. ``Marks`` writes them: with optimistic concurrency on the
Node's taints and the claim's conditions, so no other writer's change is lost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter.controllers import conditions
from karpenter.controllers.context import ControllerContext
from karpenter.core.disruption.commands import Command
from karpenter.core.model import labels as lbl
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, NODES, Obj

COMMAND_ANNOTATION = "karpenter.sh/disruption-command"
REPLACEMENT_ANNOTATION = "karpenter.sh/disruption-replacement-of"
DISRUPTION_REASON = "DisruptionReason"
DISRUPTED_TAINT: Obj = {"key": lbl.TAINT_DISRUPTED, "effect": "NoSchedule"}


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


def parse(text: str) -> dict[str, Any] | None:
    """A record written by ``InFlight.record`` (None: absent or not one of ours)."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    return body if isinstance(body, dict) and isinstance(body.get("id"), str) else None


def recorded(raw: Obj) -> dict[str, Any] | None:
    """The command record on a NodeClaim object (None when it carries none)."""
    notes = codec.meta(raw).get("annotations") or {}
    return parse(str(notes.get(COMMAND_ANNOTATION, "")))


class Marks:
    """Writes (and removes) a command's marks; keeps the mirror in step with each write."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.kube = ctx.kube
        self.state = ctx.state
        self.clock = ctx.clock
        self.recorder = ctx.recorder

    async def mark_claim(self, name: str, cmd: InFlight) -> None:
        """Record ``cmd`` on the candidate NodeClaim ``name`` (annotation + condition)."""
        patch = {"metadata": {"annotations": {COMMAND_ANNOTATION: cmd.record()}}}
        self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))
        await self._condition(
            name,
            lambda conds: codec.set_condition(
                conds, DISRUPTION_REASON, "True", cmd.reason, cmd.reason, self.clock.now()
            ),
        )

    async def unmark_claim(self, name: str) -> None:
        """Remove the record and the ``DisruptionReason`` condition (absent claims are fine)."""
        patch = {"metadata": {"annotations": {COMMAND_ANNOTATION: None}}}
        try:
            self.state.nodeclaims.upsert(await self.kube.merge_patch(NODECLAIMS, name, patch))
        except errors.NotFound:
            return
        await self.clear_reason(name)

    async def clear_reason(self, name: str) -> None:
        """Remove the claim's ``DisruptionReason`` condition, if it has one."""

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

    async def taint(self, node: str, *, add: bool) -> None:
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

    async def delete(self, name: str) -> bool:
        """Delete a NodeClaim; False when it was already gone."""
        try:
            await self.kube.delete(NODECLAIMS, name)
        except errors.NotFound:
            return False
        return True

    async def event(self, claim: str, reason: str, message: str) -> None:
        """A Normal Event on the claim's Node (when registered) and on the claim."""
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
