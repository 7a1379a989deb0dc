"""Consistency checks: does a registered Node look like what its NodeClaim promised?

Upstream's one check is the node shape: for every resource the NodeClaim requested, the Node's
capacity must be at least 90% of the capacity the NodeClaim expected at launch; below that the
claim gets a ``FailedConsistencyCheck`` Warning Event per issue and ``ConsistentStateFound=False``
(``ConsistencyCheckFailed``), otherwise ``ConsistentStateFound=True``. Deleting and
uninitialized claims are not checked.
"""

from __future__ import annotations

from karpenter.core.model import quantity
from karpenter.core.model.node import Node, NodeClaim

MIN_SHARE = 0.90


def node_shape_issues(claim: NodeClaim, node: Node) -> list[str]:
    """One message per resource the Node has less than 90% of the expected amount of."""
    if claim.deleting or not claim.initialized:
        return []
    issues = []
    for name in sorted(claim.requests):
        expected = claim.capacity.get(name, 0)
        if not claim.requests[name] or not expected:
            continue
        found = node.capacity.get(name, 0)
        share = found / expected
        if share < MIN_SHARE:
            issues.append(
                f"expected {quantity.format_quantity(expected, name)} of resource {name}, but "
                f"found {quantity.format_quantity(found, name)} ({share * 100:0.1f}% of expected)"
            )
    return issues
