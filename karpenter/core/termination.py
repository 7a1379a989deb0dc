"""Node drain: which pods leave a terminating Node, in what order, and when the wait is over.

A Node being terminated is drained in four tiers, as Kubernetes' graceful node shutdown does:
non-critical workloads, then non-critical DaemonSet pods, then critical workloads, then
critical DaemonSet pods (critical: priority class ``system-cluster-critical`` or
``system-node-critical``). A tier is asked to leave only once every pod of the tiers before it
is *gone*, not merely asked to go: log shippers and node agents keep serving the workloads
while those shut down. (Upstream moves on as soon as the earlier tier is terminating; waiting
for it is the stricter reading of the same rule.)

Not drained at all: pods that tolerate ``karpenter.sh/disrupted:NoSchedule`` (they chose to
stay until the end, e.g. DaemonSets tolerating everything), mirror pods, terminal pods, and pods
stuck terminating a minute past their deletionTimestamp (a dead kubelet never confirms them).

The NodeClaim's terminationGracePeriod (TGP) bounds the drain: with deletion at ``t`` the
deadline is ``t + TGP``. Each pod is deleted outright, bypassing PDBs and
``karpenter.sh/do-not-disrupt``, at ``deadline - pod grace`` so it still gets its whole grace
period before the instance goes. Without a TGP a PDB or do-not-disrupt pod can hold the Node
forever, which is what its owner asked for.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from karpenter.core.disruption.candidates import do_not_disrupt_active
from karpenter.core.model import labels as lbl
from karpenter.core.model.pod import Pod
from karpenter.core.scheduling.taints import NO_SCHEDULE, Taint

DISRUPTED_TAINT = Taint(lbl.TAINT_DISRUPTED, NO_SCHEDULE)
CRITICAL_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
TIERS = ("non-critical", "non-critical-daemonset", "critical", "critical-daemonset")
# Kubernetes' default terminationGracePeriodSeconds (the API server fills it in; a decoded pod
# without one came from a test or an old object).
DEFAULT_POD_GRACE_S = 30
# A pod this long past its deletionTimestamp has no kubelet left to confirm it; stop waiting.
STUCK_TERMINATING_S = 60.0
# Drained is not declared before the drain has run this long: a pod the scheduler bound just
# before the disrupted taint reached its cache would otherwise be missed.
MIN_DRAIN_S = 5.0
_EVICTION_RETRY_START_S = 0.1
_EVICTION_RETRY_MAX_S = 10.0


@dataclass(frozen=True, slots=True)
class ForceDelete:
    """Delete ``pod`` with ``grace_s`` (bypassing PDBs): the TGP deadline is near."""

    pod: Pod
    grace_s: int


@dataclass(frozen=True, slots=True)
class DrainPlan:
    """One drain pass: what to delete, what to evict, what is held back, what is left."""

    delete: tuple[ForceDelete, ...]
    evict: tuple[Pod, ...]
    # do-not-disrupt pods of the current tier: neither evicted nor deleted (yet)
    held: tuple[Pod, ...]
    # every drainable pod still on the Node (terminating ones included)
    remaining: tuple[Pod, ...]
    tier: str

    @property
    def drained(self) -> bool:
        """Nothing drainable is left on the Node."""
        return not self.remaining


def termination_deadline(deleted_at: float | None, grace_s: float | None) -> float | None:
    """When the NodeClaim's terminationGracePeriod runs out (None: no TGP, or not deleted)."""
    if deleted_at is None or grace_s is None:
        return None
    return deleted_at + grace_s


def is_critical(pod: Pod) -> bool:
    """A system-critical priority class."""
    return pod.priority_class_name in CRITICAL_PRIORITY_CLASSES


def tier(pod: Pod) -> int:
    """The pod's drain tier, 0 first (an index into ``TIERS``)."""
    return 2 * is_critical(pod) + pod.is_daemonset_pod()


def stuck_terminating(pod: Pod, now: float) -> bool:
    """Terminating for over a minute past its deletionTimestamp."""
    return (
        pod.deleting
        and pod.deletion_time is not None
        and now - pod.deletion_time > STUCK_TERMINATING_S
    )


def drainable(pod: Pod, now: float) -> bool:
    """A pod the drain must see gone before the Node may go."""
    return (
        not pod.is_terminal()
        and not pod.is_mirror_pod()
        and not any(t.tolerates(DISRUPTED_TAINT) for t in pod.tolerations)
        and not stuck_terminating(pod, now)
    )


def force_delete_grace(pod: Pod, now: float, deadline: float | None) -> int | None:
    """The grace to delete ``pod`` with now, or None while it may still be evicted politely.

    Due at ``deadline - pod grace``; the grace is what is left until the deadline, at least
    1 s (0 would remove the object before the kubelet stopped the containers) unless the pod
    itself asked for 0. A pod already terminating is deleted again only when its own
    deletionTimestamp would outlive the deadline: that call shortens its grace.
    """
    if deadline is None:
        return None
    own = pod.termination_grace_seconds
    own = DEFAULT_POD_GRACE_S if own is None else own
    grace = min(own, max(math.ceil(deadline - now), 1))
    if pod.deleting:
        ends = pod.deletion_time
        return grace if ends is not None and ends > deadline and ends - now > grace else None
    return grace if now >= deadline - own else None


def plan_drain(pods: Sequence[Pod], now: float, deadline: float | None) -> DrainPlan:
    """Decide one drain pass over the pods bound to the Node."""
    remaining = sorted((p for p in pods if drainable(p, now)), key=lambda p: (p.key, p.uid))
    deletes = []
    for pod in remaining:
        grace = force_delete_grace(pod, now, deadline)
        if grace is not None:
            deletes.append(ForceDelete(pod, grace))
    forced = {d.pod.key for d in deletes}
    current = min((tier(p) for p in remaining), default=0)
    askable = [
        p for p in remaining if tier(p) == current and not p.deleting and p.key not in forced
    ]
    held = tuple(p for p in askable if do_not_disrupt_active(p, now))
    held_keys = {p.key for p in held}
    return DrainPlan(
        delete=tuple(deletes),
        evict=tuple(p for p in askable if p.key not in held_keys),
        held=held,
        remaining=tuple(remaining),
        tier=TIERS[current],
    )


def drained_after(draining_since: float | None, now: float) -> float:
    """Seconds until Drained may be declared (0: now), counted from when draining started."""
    if draining_since is None:
        return MIN_DRAIN_S
    return max(draining_since + MIN_DRAIN_S - now, 0.0)


def eviction_retry_s(failures: int) -> float:
    """Back-off before evicting a pod again after ``failures`` refusals (PDB, errors)."""
    delay: float = _EVICTION_RETRY_START_S * 2.0 ** max(failures - 1, 0)
    return min(delay, _EVICTION_RETRY_MAX_S)


def volumes_blocking(
    attachments: Sequence[tuple[str, str]], kept_volumes: Collection[str]
) -> tuple[str, ...]:
    """VolumeAttachments (name, PV name) still to detach before the instance may go.

    Volumes of pods that were not drained (they tolerate the disrupted taint, or are stuck)
    stay attached until the instance is gone; waiting for them would never end.
    """
    return tuple(sorted(name for name, pv in attachments if pv not in kept_volumes))
