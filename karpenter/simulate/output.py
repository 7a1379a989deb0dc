"""Rendering simulation results: the JSON contract of ``karpenter simulate`` and a table view.

New NodeClaims are named ``simulated-<n>`` in launch order; their ``kubernetes.io/hostname``
label is that name. CapacityBuffer virtual pods are kept out of ``pods`` and ``unschedulable``
(which list the scenario's own pods): a claim or node lists them under ``capacityBufferPods``,
and ``capacityBuffers`` (present only when the scenario has buffers) says per buffer what the
controller would write to its status. Prices are rounded to 6 decimals so float noise never
reaches the contract.
``dumps`` writes the JSON as ``json.dumps(doc, indent=2)`` does, in half the time: the standard
library indents in Python, and the document of 100,000 pods is 120 MB (each NodeClaim lists its
instance types).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii
from typing import Any

from karpenter.api.capacitybuffer import BufferSpec, Resolution
from karpenter.core import buffers
from karpenter.core.disruption.planner import Plan
from karpenter.core.model import labels as lbl
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning import lowerbound
from karpenter.core.provisioning.results import NewNodeClaim, Results
from karpenter.core.scheduling.taints import Taint

JSON = dict[str, Any]
Buffers = Sequence[tuple[BufferSpec, Resolution]]


def _price(value: float) -> float:
    return round(value, 6)


def cost_json(price: float, bound: float | None) -> JSON:
    """The fleet's price, a lower bound no valid fleet beats, and their ratio (null when
    there is no bound above zero for a positive price)."""
    figures = lowerbound.cost(price, bound)
    return {
        "perHour": figures.per_hour,
        "lowerBoundPerHour": figures.lower_bound_per_hour,
        "ratio": figures.ratio,
    }


def _taint(t: Taint) -> JSON:
    out: JSON = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def claim_json(claim: NewNodeClaim, name: str) -> JSON:
    """One NodeClaim object of the contract."""
    labels = dict(claim.labels)
    labels[lbl.HOSTNAME] = name
    launch: JSON = {
        "instanceType": claim.launch.instance_type,
        "zone": claim.launch.zone,
        "capacityType": claim.launch.capacity_type,
        "price": _price(claim.launch.price),
    }
    if claim.launch.reservation_id:
        launch["reservationID"] = claim.launch.reservation_id
    if claim.hedged_from:
        # the pass's cheapest type, replaced by one that holds the mix of pods the
        # kube-scheduler will bind here (FEATURE_GATES=MixingHedge)
        launch["hedgedFrom"] = claim.hedged_from
    return {
        "name": name,
        "nodePool": claim.nodepool,
        "instanceTypes": [it.name for it in claim.instance_types],
        "launch": launch,
        "labels": dict(sorted(labels.items())),
        "taints": [_taint(t) for t in claim.taints],
        **_pods(claim.pods),
    }


def _pods(pods: Sequence[Pod]) -> JSON:
    """``pods``, and ``capacityBufferPods`` when virtual pods are among them."""
    virtual = [p.key for p in pods if buffers.is_virtual(p)]
    if not virtual:
        return {"pods": [p.key for p in pods]}
    return {
        "pods": [p.key for p in pods if not buffers.is_virtual(p)],
        "capacityBufferPods": virtual,
    }


def claims_json(claims: Sequence[NewNodeClaim], start: int = 1) -> list[JSON]:
    """NodeClaims named ``simulated-<n>`` from ``start`` on."""
    return [claim_json(c, f"simulated-{i}") for i, c in enumerate(claims, start)]


def provisioning_json(
    results: Results, buffered: Buffers = (), virtual: Sequence[Pod] = ()
) -> JSON:
    """The provisioning-mode document (``buffered``: the scenario's resolved buffers, whose
    ``virtual`` pods the pass scheduled)."""
    deferred = results.deferred
    skip = {p.key for p in virtual}
    doc: JSON = {
        "nodeClaims": claims_json(results.new_claims),
        "existingNodes": [{"name": name, **_pods(pods)} for name, pods in results.existing],
        "unschedulable": [
            # deferred: the pod waits for reserved capacity (strict mode), it did not fail
            {"pod": key, "reason": reason, **({"deferred": True} if key in deferred else {})}
            for key, reason in sorted(results.unschedulable.items())
            if key not in skip
        ],
        "pricePerHour": _price(results.price),
        "cost": cost_json(results.price, results.lower_bound),
    }
    if buffered:
        doc["capacityBuffers"] = buffers_json(buffered, results, virtual)
    return doc


def _condition(status: str, reason: str, message: str) -> JSON:
    return {"status": status, "reason": reason, "message": message}


def buffers_json(buffered: Buffers, results: Results | None, virtual: Sequence[Pod]) -> list[JSON]:
    """Per buffer: its ``ReadyForProvisioning`` condition and ``replicas``, and after a
    provisioning pass (``results``) its ``Provisioning`` condition and unplaced virtual pods."""
    placed = buffers.placements(results, virtual) if results is not None else {}
    out = []
    for spec, resolution in buffered:
        replicas = resolution.status.get("replicas")
        doc: JSON = {
            "name": spec.key,
            "readyForProvisioning": _condition(
                "True" if resolution.ready else "False", resolution.reason, resolution.message
            ),
            "replicas": replicas,
        }
        if results is not None:
            cond = buffers.provisioning_condition(resolution.ready, replicas, placed.get(spec.key))
            doc["provisioning"] = (
                _condition(cond.status, cond.reason, cond.message) if cond is not None else None
            )
            doc["unschedulable"] = [
                {"pod": p.key, "reason": results.unschedulable[p.key]}
                for p in virtual
                if buffers.buffer_of(p) == spec.key and p.key in results.unschedulable
            ]
        out.append(doc)
    return out


def provisioning_table(doc: JSON) -> str:
    """A human summary of the provisioning document."""
    lines = [
        f"{'NODECLAIM':<16}{'NODEPOOL':<16}{'INSTANCE TYPE':<20}{'ZONE':<16}"
        f"{'CAPACITY':<11}{'PRICE/H':>10}  PODS"
    ]
    for c in doc["nodeClaims"]:
        launch = c["launch"]
        lines.append(
            f"{c['name']:<16}{c['nodePool']:<16}{launch['instanceType']:<20}{launch['zone']:<16}"
            f"{launch['capacityType']:<11}{launch['price']:>10.4f}  {len(c['pods'])}"
        )
    for node in doc["existingNodes"]:
        lines.append(
            f"{node['name']:<16}{'(existing)':<16}{'':<20}{'':<16}{'':<11}{'':>10}  "
            f"{len(node['pods'])}"
        )
    lines.append("")
    lines.append(
        f"{len(doc['nodeClaims'])} new node(s), {sum(len(c['pods']) for c in doc['nodeClaims'])}"
        f" pod(s) on them, {sum(len(n['pods']) for n in doc['existingNodes'])} on existing nodes;"
        f" {doc['pricePerHour']:.4f} USD/hour"
    )
    cost = doc.get("cost")
    if cost:
        ratio = "n/a" if cost["ratio"] is None else f"{cost['ratio']:.3f}"
        lines.append(
            f"cost: {cost['perHour']:.4f} USD/hour, lower bound {cost['lowerBoundPerHour']:.4f}"
            f" (ratio {ratio})"
        )
    if doc["unschedulable"]:
        lines.append(f"{len(doc['unschedulable'])} pod(s) cannot be scheduled:")
        lines.extend(f"  {u['pod']}: {u['reason']}" for u in doc["unschedulable"])
    lines.extend(_buffer_lines(doc.get("capacityBuffers") or []))
    return "\n".join(lines)


def _buffer_lines(docs: list[JSON]) -> list[str]:
    lines = [f"{len(docs)} capacity buffer(s):"] if docs else []
    for b in docs:
        ready, provisioning = b["readyForProvisioning"], b.get("provisioning")
        line = f"  {b['name']}: {ready['reason']}, {b['replicas'] or 0} replica(s)"
        if provisioning:
            line += f"; {provisioning['reason']}: {provisioning['message']}"
        elif ready["status"] != "True":
            line += f": {ready['message']}"
        lines.append(line)
    return lines


def disruption_json(result: Plan, buffered: Buffers = ()) -> JSON:
    """The disruption-mode document (contract fields, plus method/savings/moves/blocked, and
    the buffers' readiness when the scenario has buffers)."""
    commands = []
    for step in result.steps:
        command = step.command
        replacements = []
        for index, (claim, name) in enumerate(
            zip(command.replacements, step.replacement_names, strict=True)
        ):
            replacement = claim_json(claim, name)
            replacement["pods"] = [key for key, to in command.moves if to == f"replacement:{index}"]
            replacements.append(replacement)
        moves = [{"pod": key, "node": step.destination(to)} for key, to in command.moves]
        commands.append(
            {
                "reason": command.reason,
                "nodes": list(command.names),
                "replacements": replacements,
                "method": command.method,
                "savingsPerHour": _price(command.savings),
                "podsMoved": moves,
            }
        )
    out: JSON = {
        "commands": commands,
        "pricePerHourBefore": _price(result.price_before),
        "pricePerHourAfter": _price(result.price_after),
        "blocked": [{"node": b.name, "reason": b.reason} for b in result.blocked],
    }
    if buffered:
        out["capacityBuffers"] = buffers_json(buffered, None, ())
    return out


def disruption_table(doc: JSON) -> str:
    """A human summary of the disruption document."""
    lines = [f"{'#':>3}  {'REASON':<14}{'SAVINGS/H':>10}  NODES -> REPLACEMENTS"]
    for i, c in enumerate(doc["commands"], 1):
        nodes = ", ".join(c["nodes"])
        if len(nodes) > 60:
            nodes = f"{nodes[:57]}... ({len(c['nodes'])} nodes)"
        new = ", ".join(
            f"{r['name']} ({r['launch']['instanceType']} {r['launch']['capacityType']})"
            for r in c["replacements"]
        )
        lines.append(
            f"{i:>3}  {c['reason']:<14}{c['savingsPerHour']:>10.4f}  {nodes} -> {new or '(delete)'}"
        )
    lines.append("")
    before, after = doc["pricePerHourBefore"], doc["pricePerHourAfter"]
    saved = before - after
    share = f" ({saved / before:.1%})" if before > 0 else ""
    lines.append(
        f"{len(doc['commands'])} command(s); {before:.4f} -> {after:.4f} USD/hour,"
        f" saving {saved:.4f}{share}"
    )
    if doc["blocked"]:
        lines.append(f"{len(doc['blocked'])} node(s) left as they are:")
        lines.extend(f"  {b['node']}: {b['reason']}" for b in doc["blocked"])
    return "\n".join(lines)


def dumps(doc: object) -> str:
    """``json.dumps(doc, indent=2)``, byte for byte."""
    out: list[str] = []
    _dump(doc, "", out)
    return "".join(out)


def _dump(value: object, pad: str, out: list[str]) -> None:
    if type(value) is str:
        out.append(encode_basestring_ascii(value))
    elif type(value) is dict:
        _dump_dict(value, pad, out)
    elif type(value) is list:
        _dump_list(value, pad, out)
    else:
        out.append(json.dumps(value))


def _dump_dict(value: dict[Any, Any], pad: str, out: list[str]) -> None:
    if not value:
        out.append("{}")
        return
    inner = pad + "  "
    out.append("{\n" + inner)
    for index, (key, item) in enumerate(value.items()):
        if index:
            out.append(",\n" + inner)
        out.append(encode_basestring_ascii(key if type(key) is str else json.dumps(key)))
        out.append(": ")
        _dump(item, inner, out)
    out.append("\n" + pad + "}")


def _dump_list(value: list[Any], pad: str, out: list[str]) -> None:
    if not value:
        out.append("[]")
        return
    inner = pad + "  "
    if all(type(item) is str for item in value):  # instance types, pods: most of the bytes
        lines = (",\n" + inner).join(map(encode_basestring_ascii, value))
        out.append("[\n" + inner + lines + "\n" + pad + "]")
        return
    out.append("[\n" + inner)
    for index, item in enumerate(value):
        if index:
            out.append(",\n" + inner)
        _dump(item, inner, out)
    out.append("\n" + pad + "]")
