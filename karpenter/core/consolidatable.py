"""When a NodeClaim is ``Consolidatable``: ``consolidateAfter`` elapsed since its last pod event.

Upstream's rule: the condition exists only for initialized claims of a NodePool whose
``consolidateAfter`` is not ``Never``; the clock starts at ``status.lastPodEventTime``, or at the
``Initialized`` transition when no pod event was seen yet (that is when pods could first land).
The shell writes the condition and comes back at the returned time. The disruption core starts
the same clock with ``window_start`` (upstream's disruption reads the condition itself), so
the condition and the decisions agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter.core.model.node import NodeClaim
from karpenter.core.model.nodepool import NodePool


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the condition should be present, and when to look again (None: on change)."""

    consolidatable: bool
    recheck_at: float | None
    why: str


def window_start(claim: NodeClaim) -> float | None:
    """When the ``consolidateAfter`` clock of ``claim`` started (None: not initialized)."""
    if not claim.initialized or claim.initialized_at is None:
        return None
    return claim.last_pod_event if claim.last_pod_event else claim.initialized_at


def consolidatable(claim: NodeClaim, pool: NodePool, now: float) -> Verdict:
    """The ``Consolidatable`` verdict for ``claim`` at ``now``."""
    after = pool.disruption.consolidate_after
    if after is None:
        return Verdict(False, None, "consolidation is disabled")
    since = window_start(claim)
    if since is None:
        return Verdict(False, None, "nodeclaim isn't initialized")
    at = since + after
    if now < at:
        return Verdict(False, at, "consolidateAfter window not yet elapsed")
    return Verdict(True, None, "consolidateAfter elapsed")
