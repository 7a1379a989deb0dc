"""Rendering simulation results: the JSON contract of ``karpenter simulate`` and a table view.

New NodeClaims are named ``simulated-<n>`` in launch order; their ``kubernetes.io/hostname``
label is that name. Prices are rounded to 6 decimals so float noise never reaches the contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from karpenter.core.model import labels as lbl
from karpenter.core.provisioning.results import NewNodeClaim, Results
from karpenter.core.scheduling.taints import Taint

JSON = dict[str, Any]


def _price(value: float) -> float:
    return round(value, 6)


def _taint(t: Taint) -> JSON:
    out: JSON = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def claim_json(claim: NewNodeClaim, name: str) -> JSON:
    """One NodeClaim object of the contract."""
    labels = dict(claim.labels)
    labels[lbl.HOSTNAME] = name
    return {
        "name": name,
        "nodePool": claim.nodepool,
        "instanceTypes": [it.name for it in claim.instance_types],
        "launch": {
            "instanceType": claim.launch.instance_type,
            "zone": claim.launch.zone,
            "capacityType": claim.launch.capacity_type,
            "price": _price(claim.launch.price),
        },
        "labels": dict(sorted(labels.items())),
        "taints": [_taint(t) for t in claim.taints],
        "pods": [p.key for p in claim.pods],
    }


def claims_json(claims: Sequence[NewNodeClaim], start: int = 1) -> list[JSON]:
    """NodeClaims named ``simulated-<n>`` from ``start`` on."""
    return [claim_json(c, f"simulated-{i}") for i, c in enumerate(claims, start)]


def provisioning_json(results: Results) -> JSON:
    """The provisioning-mode document."""
    return {
        "nodeClaims": claims_json(results.new_claims),
        "existingNodes": [
            {"name": name, "pods": [p.key for p in pods]} for name, pods in results.existing
        ],
        "unschedulable": [
            {"pod": key, "reason": reason} for key, reason in sorted(results.unschedulable.items())
        ],
        "pricePerHour": _price(results.price),
    }


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
    if doc["unschedulable"]:
        lines.append(f"{len(doc['unschedulable'])} pod(s) cannot be scheduled:")
        lines.extend(f"  {u['pod']}: {u['reason']}" for u in doc["unschedulable"])
    return "\n".join(lines)
