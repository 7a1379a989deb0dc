"""After a restart: the commands a previous leader left in the cluster, and what becomes of each.

Upstream keeps its orchestration queue in memory only. A restarted upstream controller forgets
every command: before its first decision it removes the disrupted taint from every node its
(empty) queue does not hold and that is not being deleted, and clears the ``DisruptionReason``
conditions; replacements already created stay as ordinary capacity, and candidates already
being deleted go on being deleted. Here each command is recorded on its candidates
(``disruption_marks``), which lets a restart do better in one case and match upstream in the
others:

- a command whose replacements all exist is resumed: it goes on waiting for them, so no second
  replacement is launched for the same candidates by a fresh decision;
- a delete-only command (no replacements) that was not finished is rolled back, as upstream
  does: its decision belonged to the previous leader, and the next pass decides again from the
  cluster as it is now, with fresh budgets and validation;
- a command interrupted before its replacements existed is rolled back too (any replacement it
  made that is not initialized is deleted, since it was launched only for the command).

A restart rollback is not a failed command: no queue-failure metric and no backoff (upstream
keeps no per-candidate backoff at all; ours is an in-memory refinement, see
docs/operations.md). Taints and ``DisruptionReason`` conditions no command accounts for are
removed, as upstream does.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from typing import Any

from karpenter.controllers.disruption_marks import (
    DISRUPTED_TAINT,
    DISRUPTION_REASON,
    REPLACEMENT_ANNOTATION,
    InFlight,
    recorded,
)
from karpenter.kube import codec
from karpenter.state.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class Adoption:
    """A recorded command and the verdict on it (``why`` says why it is rolled back)."""

    command: InFlight
    resume: bool
    why: str = ""


def verdict(cmd: InFlight) -> Adoption:
    """Resume a command whose replacements all exist; roll back every other one."""
    if cmd.expected == 0:
        return Adoption(cmd, False, "delete-only command interrupted by a restart")
    if len(cmd.replacements) != cmd.expected:
        return Adoption(cmd, False, "interrupted before its replacements existed")
    return Adoption(cmd, True)


def _in_flight(
    body: dict[str, Any], candidates: dict[str, str], made: list[str], now: float
) -> InFlight:
    return InFlight(
        body["id"],
        str(body.get("reason", "")),
        str(body.get("method", "")),
        str(body.get("decision", "")),
        candidates,
        int(body.get("replacements", 0)),
        float(body.get("started", now)),
        sorted(made),
    )


def adoptions(state: ClusterState, now: float) -> list[Adoption]:
    """Every command recorded on a NodeClaim that is not being deleted, by id."""
    records: dict[str, dict[str, Any]] = {}
    members: dict[str, dict[str, str]] = {}
    replacements: dict[str, list[str]] = {}
    for name in sorted(state.nodeclaims.entries):
        raw = state.nodeclaims.raw(name)
        claim = state.nodeclaims.get(name)
        if raw is None or claim is None or claim.deleting:
            continue
        notes = codec.meta(raw).get("annotations") or {}
        if REPLACEMENT_ANNOTATION in notes:
            replacements.setdefault(str(notes[REPLACEMENT_ANNOTATION]), []).append(name)
        body = recorded(raw)
        if body is not None:
            records.setdefault(body["id"], body)
            members.setdefault(body["id"], {})[name] = claim.node_name
    return [
        verdict(_in_flight(records[cid], members[cid], replacements.get(cid, []), now))
        for cid in sorted(records)
    ]


def stray_taints(state: ClusterState, held: Set[str]) -> list[str]:
    """Nodes tainted disrupted that no command in ``held`` accounts for and nobody deletes."""
    out = []
    for name in sorted(state.nodes.entries):
        raw = state.nodes.raw(name)
        if raw is None or name in held or codec.meta(raw).get("deletionTimestamp"):
            continue
        if not any(codec.same_taint(t, DISRUPTED_TAINT) for t in codec.taints_of(raw)):
            continue
        claims = [state.nodeclaims.get(c) for c in state.claims_of_node(name)]
        if any(c is not None and c.deleting for c in claims):
            continue  # termination taints it too
        out.append(name)
    return out


def stray_reasons(state: ClusterState, held: Set[str]) -> list[str]:
    """NodeClaims with a ``DisruptionReason`` condition that no command in ``held`` (claim
    names) accounts for and that are not being deleted."""
    out = []
    for name in sorted(state.nodeclaims.entries):
        raw = state.nodeclaims.raw(name)
        claim = state.nodeclaims.get(name)
        if raw is None or claim is None or claim.deleting or name in held:
            continue
        if codec.condition(raw, DISRUPTION_REASON) is not None:
            out.append(name)
    return out
