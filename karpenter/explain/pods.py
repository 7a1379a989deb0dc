"""Why a pod is where it is, or where Karpenter would put it: the provisioner's solve, for one pod.

Pure: a snapshot, the pods the provisioner would batch, options in; a ``PodVerdict`` out. The
pass is the provisioner's own (``scheduler.solve`` over every provisionable pod and every
CapacityBuffer virtual pod, since they compete for the same room); the verdict is this pod's
part of it: an existing node it fits on, an in-flight NodeClaim (launched but not yet a node),
a new NodeClaim (its NodePool, its instance types cheapest first and the launch), or the
per-NodePool reasons it fits none, word for word what ``karpenter simulate`` prints. A pod the
kube-scheduler has not marked ``Unschedulable`` (nor left unjudged long enough for early
provisioning) is not provisionable yet; it is still solved, so the answer says what would happen
once it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.results import NewNodeClaim, Results
from karpenter.core.provisioning.scheduler import solve

BOUND = "bound"
EXISTING_NODE = "existing-node"
IN_FLIGHT = "in-flight-nodeclaim"
NEW_NODECLAIM = "new-nodeclaim"
UNSCHEDULABLE = "unschedulable"
DEFERRED = "deferred"
NOT_PROVISIONED = "not-provisioned"


@dataclass(frozen=True, slots=True)
class PodVerdict:
    """The answer for one pod: ``outcome`` is one of the constants above."""

    pod: Pod
    provisionable: bool
    outcome: str
    target: str = ""
    reason: str = ""
    claim: NewNodeClaim | None = None
    note: str = ""


class UnknownPod(LookupError):
    """The snapshot has no pod of that namespace/name."""


def explain_pod(
    cluster: Cluster,
    key: str,
    provisionable: Sequence[Pod],
    options: Options,
) -> PodVerdict:
    """Where the provisioner's next pass would put pod ``key`` (``namespace/name``), and why."""
    pod = next((p for p in cluster.pods if p.key == key), None)
    if pod is None:
        raise UnknownPod(key)
    if pod.node_name:
        return PodVerdict(pod, False, BOUND, pod.node_name, f"bound to node {pod.node_name}")
    if not pod.is_active():
        return PodVerdict(pod, False, NOT_PROVISIONED, reason=f"pod is {_inactive(pod)}")
    if pod.is_daemonset_pod() or pod.is_mirror_pod():
        why = "DaemonSet pods are placed by their DaemonSet, not provisioned for"
        return PodVerdict(pod, False, NOT_PROVISIONED, reason=why)
    is_provisionable = any(p.key == key for p in provisionable)
    note = (
        ""
        if is_provisionable
        else "the kube-scheduler has not marked the pod Unschedulable (and it has not waited "
        "unjudged long enough for early provisioning); this is what Karpenter would do once it does"
    )
    pending = list(provisionable) if is_provisionable else [*provisionable, pod]
    # CapacityBuffer virtual pods compete for the same room, as in the provisioner's pass
    results = solve(cluster, [*pending, *cluster.virtual_pods], options, hedge=options.mixing_hedge)
    found = placements(results, {n.name for n in cluster.nodes}).get(key)
    if found is None:
        why = "the pass did not place it (it opts out of Karpenter nodes)"
        return PodVerdict(pod, is_provisionable, NOT_PROVISIONED, reason=why, note=note)
    outcome, target, why = found
    claim = next((c for c in results.new_claims if any(p.key == key for p in c.pods)), None)
    return PodVerdict(pod, is_provisionable, outcome, target, why, claim, note)


def placements(results: Results, node_names: AbstractSet[str]) -> dict[str, tuple[str, str, str]]:
    """Pod key → (outcome, target, one line) for every pod a pass decided about; the target
    is a node, an in-flight NodeClaim, or the NodePool of a new NodeClaim."""
    out: dict[str, tuple[str, str, str]] = {}
    for name, placed in results.existing:
        if name in node_names:
            why = f"fits on existing node {name}; the kube-scheduler binds it there"
            line = (EXISTING_NODE, name, why)
        else:
            line = (IN_FLIGHT, name, f"fits on NodeClaim {name}, launched and not yet a node")
        for p in placed:
            out[p.key] = line
    for claim in results.new_claims:
        line = (
            NEW_NODECLAIM,
            claim.nodepool,
            f"no existing or in-flight capacity fits; a new NodeClaim of NodePool "
            f"{claim.nodepool} ({len(claim.instance_types)} instance types, launch "
            f"{claim.launch.instance_type} {claim.launch.capacity_type} in {claim.launch.zone})",
        )
        for p in claim.pods:
            out[p.key] = line
    for key, reason in results.unschedulable.items():
        out[key] = (DEFERRED if key in results.deferred else UNSCHEDULABLE, "", reason)
    return out


def _inactive(pod: Pod) -> str:
    return "being deleted" if pod.deleting else pod.phase
