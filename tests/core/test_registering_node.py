"""A Node that registered before its kubelet reported its status still counts as its claim's
capacity (regression found by the crash matrix, docs/reliability.md: a pass saw no room on it
and launched a second NodeClaim for the same pods)."""

from __future__ import annotations

import pytest

from karpenter.core.model.cluster import Options
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.provisioning.scheduler import solve
from tests.support import builders as b


def _claim_and_node(node_status: bool, initialized: bool) -> tuple[NodeClaim, Node]:
    it = b.catalog()[0]
    labels = {
        "karpenter.sh/nodepool": "default",
        "node.kubernetes.io/instance-type": it.name,
        "topology.kubernetes.io/zone": "zone-a",
        "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/hostname": "n1",
    }
    claim = NodeClaim(
        "default-abc",
        "default",
        labels,
        provider_id="test://n1",
        node_name="n1",
        capacity=dict(it.capacity),
        allocatable=it.allocatable,
        launched=True,
        registered=True,
        initialized=initialized,
    )
    node_labels = {**labels, "karpenter.sh/registered": "true"}
    if initialized:
        node_labels["karpenter.sh/initialized"] = "true"
    status = (dict(it.capacity), it.allocatable) if node_status else ({}, {})
    node = Node("n1", node_labels, {}, (), *status, provider_id="test://n1")
    return claim, node


@pytest.mark.parametrize(
    ("node_status", "initialized"),
    [
        pytest.param(False, False, id="registered-no-status-yet"),
        pytest.param(True, False, id="registered-with-status"),
        pytest.param(True, True, id="initialized"),
    ],
)
def test_pending_pod_goes_to_the_registering_node_not_a_new_claim(
    node_status: bool, initialized: bool
) -> None:
    """A small pending pod lands on the existing node whatever its kubelet reported so far."""
    claim, node = _claim_and_node(node_status, initialized)
    cluster = b.cluster(nodes=(node,), nodeclaims=(claim,))
    results = solve(cluster, [b.pod("p", cpu="100m")], Options())
    assert results.new_claims == ()
    assert [name for name, _ in results.existing] == ["n1"]
