"""``karpenter explain`` output: verdicts as JSON documents and as lines for people.

The JSON reuses ``karpenter simulate``'s NodeClaim objects (``simulate.output.claim_json``) so a
script reading one reads the other. Prices are USD per hour rounded to 6 decimals; a month is
730 hours.
"""

from __future__ import annotations

from typing import Any

from karpenter.core.disruption.commands import Command
from karpenter.explain.nodes import NodeVerdict
from karpenter.explain.pods import PodVerdict
from karpenter.simulate.output import claim_json

JSON = dict[str, Any]
HOURS_PER_MONTH = 730


def pod_json(v: PodVerdict) -> JSON:
    """The pod verdict as a document."""
    doc: JSON = {
        "pod": v.pod.key,
        "provisionable": v.provisionable,
        "outcome": v.outcome,
        "reason": v.reason,
    }
    if v.target:
        doc["target"] = v.target
    if v.claim is not None:
        doc["nodeClaim"] = claim_json(v.claim, "new")
    if v.note:
        doc["note"] = v.note
    return doc


def pod_table(doc: JSON) -> str:
    """The pod document for people."""
    verdict = "yes" if doc["provisionable"] else "no"
    lines = [
        f"pod {doc['pod']}",
        f"  provisionable: {verdict}",
        f"  outcome:       {doc['outcome']}",
        f"  why:           {doc['reason']}",
    ]
    claim = doc.get("nodeClaim")
    if claim is not None:
        launch = claim["launch"]
        types = claim["instanceTypes"]
        shown = ", ".join(types[:5]) + (f" (+{len(types) - 5} more)" if len(types) > 5 else "")
        lines.append(f"  nodepool:      {claim['nodePool']}")
        lines.append(f"  types:         {shown}")
        lines.append(
            f"  launch:        {launch['instanceType']} {launch['capacityType']} "
            f"{launch['zone']} at {launch['price']:.4f} USD/hour"
        )
    if doc.get("note"):
        lines.append(f"  note:          {doc['note']}")
    return "\n".join(lines)


def command_json(command: Command) -> JSON:
    """A disruption command (``simulate --disruption``'s fields, plus decision and monthly)."""
    return {
        "reason": command.reason,
        "method": command.method,
        "decision": command.decision,
        "nodes": list(command.names),
        "replacements": [
            claim_json(c, f"replacement-{i}") for i, c in enumerate(command.replacements)
        ],
        "savingsPerHour": round(command.savings, 6),
        "savingsPerMonth": round(command.savings * HOURS_PER_MONTH, 2),
        "podsMoved": [{"pod": key, "node": to} for key, to in command.moves],
    }


def node_json(v: NodeVerdict) -> JSON:
    """The node verdict as a document."""
    return {
        "node": v.name,
        "nodePool": v.nodepool,
        "managed": v.managed,
        "candidate": v.candidate,
        "reasons": [{"kind": r.kind, "message": r.message} for r in v.reasons],
        "command": command_json(v.command) if v.command is not None else None,
        "nextCommand": command_json(v.next_command) if v.next_command is not None else None,
    }


def _command_lines(doc: JSON) -> list[str]:
    new = ", ".join(
        f"{r['launch']['instanceType']} {r['launch']['capacityType']}" for r in doc["replacements"]
    )
    return [
        f"  command:       {doc['decision']} {', '.join(doc['nodes'])}"
        + (f" -> {new}" if new else ""),
        f"  reason:        {doc['reason']} ({doc['method']})",
        f"  savings:       {doc['savingsPerHour']:.4f} USD/hour "
        f"({doc['savingsPerMonth']:.2f} USD/month)",
    ]


def node_table(doc: JSON) -> str:
    """The node document for people."""
    lines = [
        f"node {doc['node']}" + (f" (NodePool {doc['nodePool']})" if doc["nodePool"] else ""),
        f"  candidate:     {'yes' if doc['candidate'] else 'no'}",
    ]
    if doc["command"] is not None:
        lines += _command_lines(doc["command"])
    for r in doc["reasons"]:
        lines.append(f"  - {r['kind']}: {r['message']}")
    nxt = doc["nextCommand"]
    if nxt is not None and doc["node"] not in nxt["nodes"]:
        lines.append(
            f"  next pass:     {nxt['decision']} {', '.join(nxt['nodes'])} ({nxt['reason']})"
        )
    return "\n".join(lines)
