"""NodeClaim lifecycle rules: the NodePool template hash (static drift) and expiry.

The hash covers what upstream's ``NodePool.Hash()`` covers: ``spec.template.metadata`` labels and
annotations, and of ``spec.template.spec`` the taints, startupTaints, nodeClassRef, expireAfter
and terminationGracePeriod. Requirements and resources are left out on purpose (requirement
changes are judged by compatibility, not by hash). Lists that are sets in Kubernetes (taints)
are sorted first, so reordering them is not drift. The value is the first 16 hex digits of a
SHA-256 over canonical JSON; it differs from upstream's number, so the version annotation is our
own ``v3``-compatible constant and a controller taking over from Go Karpenter re-stamps hashes
on a version mismatch rather than calling every node drifted.
"""

from __future__ import annotations

import hashlib
import json

from karpenter.core.model.nodepool import NodePool
from karpenter.core.scheduling.taints import Taint


def _taints(taints: tuple[Taint, ...]) -> list[list[str]]:
    return sorted([t.key, t.value, t.effect] for t in taints)


def nodepool_hash(pool: NodePool) -> str:
    """The static-drift hash of a NodePool's template."""
    t = pool.template
    doc = {
        "labels": dict(sorted(t.labels.items())),
        "annotations": dict(sorted(t.annotations.items())),
        "taints": _taints(t.taints),
        "startupTaints": _taints(t.startup_taints),
        "nodeClassRef": [t.node_class_ref.group, t.node_class_ref.kind, t.node_class_ref.name],
        "expireAfter": t.expire_after,
        "terminationGracePeriod": t.termination_grace_seconds,
    }
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def expires_at(creation: float, expire_after: float | None) -> float | None:
    """When a NodeClaim created at ``creation`` expires (None: never)."""
    return None if expire_after is None else creation + expire_after
