"""The codec: NodeClaim manifests from solver decisions round-trip through the CRD model."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.api import decode
from karpenter.core.lifecycle import nodepool_hash
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.core.scheduling.taints import Taint, Toleration
from karpenter.kube import codec
from tests.support import builders as b

POOL_OBJ: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "web", "uid": "pool-uid"},
}


def test_nodeclaim_manifest_carries_identity_ownership_and_hash() -> None:
    """generateName, owner reference, nodepool label, hash annotations, finalizer, requests."""
    pool = b.nodepool(
        "web",
        labels={"team": "a"},
        taints=(Taint("dedicated", "NoSchedule", "web"),),
        requirements=b.term(("karpenter.sh/capacity-type", "In", ["spot"])),
    )
    tolerate = (Toleration(key="dedicated", operator="Equal", value="web"),)
    pods = [b.pod(cpu="1", tolerations=tolerate) for _ in range(2)]
    results = solve(b.cluster([pool]), pods, Options())
    assert len(results.new_claims) == 1
    body = codec.nodeclaim_manifest(results.new_claims[0], pool, POOL_OBJ)
    meta = body["metadata"]
    assert meta["generateName"] == "web-"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "web",
            "uid": "pool-uid",
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"][lbl.NODEPOOL] == "web"
    assert meta["labels"]["team"] == "a"
    assert meta["labels"][lbl.CAPACITY_TYPE] == "spot"
    assert meta["annotations"][lbl.NODEPOOL_HASH] == nodepool_hash(pool)
    assert meta["finalizers"] == [lbl.FINALIZER_TERMINATION]
    assert body["spec"]["taints"] == [{"key": "dedicated", "effect": "NoSchedule", "value": "web"}]
    # The manifest decodes back through the NodeClaim CRD model into the same requests.
    claim = decode.node_claim({**body, "metadata": {**meta, "name": "web-abcde"}})
    assert claim.requests == results.new_claims[0].requests
    assert claim.nodepool == "web"


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        pytest.param(
            Requirement.new("a", "In", ["2", "1"]),
            [{"key": "a", "operator": "In", "values": ["1", "2"]}],
            id="in-sorted",
        ),
        pytest.param(
            Requirement.new("a", "DoesNotExist"),
            [{"key": "a", "operator": "DoesNotExist"}],
            id="does-not-exist",
        ),
        pytest.param(
            Requirement.new("a", "Gt", ["3"]),
            [{"key": "a", "operator": "Gt", "values": ["3"]}],
            id="gt",
        ),
        pytest.param(
            Requirement.new("a", "NotIn", ["x"]).intersection(Requirement.new("a", "Lt", ["9"])),
            [
                {"key": "a", "operator": "NotIn", "values": ["x"]},
                {"key": "a", "operator": "Lt", "values": ["9"]},
            ],
            id="not-in-with-bound",
        ),
    ],
)
def test_requirements_encode_as_node_selector_requirements(
    req: Requirement, expected: list[dict[str, Any]]
) -> None:
    """Bounds become Gt/Lt entries beside the set operator."""
    assert codec.requirements(Requirements([req])) == expected


def test_set_condition_moves_transition_time_only_on_status_change() -> None:
    """Reason/message updates keep lastTransitionTime; a status flip moves it."""
    conds: list[dict[str, Any]] = []
    assert codec.set_condition(conds, "Launched", "Unknown", "LaunchFailed", "x", 100.0)
    first = conds[0]["lastTransitionTime"]
    assert codec.set_condition(conds, "Launched", "Unknown", "LaunchFailed", "y", 200.0)
    assert conds[0]["lastTransitionTime"] == first
    assert not codec.set_condition(conds, "Launched", "Unknown", "LaunchFailed", "y", 300.0)
    assert codec.set_condition(conds, "Launched", "True", "Launched", "", 400.0)
    assert conds[0]["lastTransitionTime"] == codec.rfc3339(400.0)


@pytest.mark.parametrize(
    ("milli", "text"),
    [(1000, "1"), (250, "250m"), (2**30 * 1000, str(2**30)), (0, "0")],
)
def test_quantities(milli: int, text: str) -> None:
    """Whole units print plain, fractions in milli-units."""
    assert codec.quantity(milli) == text


def _pinned_pod(node_name: str) -> dict[str, Any]:
    pin = {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [pin]}]}}}  # fmt: skip
    spec: dict[str, Any] = {"containers": [{"name": "c"}], "affinity": affinity}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": "agent-x", "namespace": "default"}, "spec": spec}


def test_daemonset_pin_is_ignored_once_the_pod_is_bound() -> None:
    """A bound DaemonSet pod decodes despite its matchFields pin; an unbound one still does not."""
    assert decode.pod(_pinned_pod("node-a")).node_name == "node-a"
    with pytest.raises(decode.CodecError):
        decode.pod(_pinned_pod(""))
