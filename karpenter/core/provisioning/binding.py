"""Where the kube-scheduler will bind pods: in arrival order, each on the best-scoring node.

The solver places pods first fit, largest first, and packs them tightly; the kube-scheduler
does neither. It takes pods in the order they reach its queue and binds each to the node that
scores highest among those its filters pass, and with the default profile, for pods that
request CPU and memory and prefer nothing, the scores that differ between nodes are
NodeResourcesFit's ``LeastAllocated`` and ``NodeResourcesBalancedAllocation`` (weight 1 each):
it spreads pods onto the emptiest nodes. A plan that counts on the room existing nodes leave
being filled as packed can then strand a pod: the room it was planned into went to others a
piece at a time, and no node has enough left. Consolidation asks this module whether the pods
a command evicts would all find a node (``core/disruption/simulation.py``).

Emulated: the filters are the solver's own (``targets.try_existing``: taints, host ports,
resources, volumes, node selection, required topology spread and pod (anti-)affinity), so
what fits is exactly what the plan assumes; the score is the two resource scores over CPU and
memory, each 0-100 and computed with the pod added:

- LeastAllocated: the mean of ``free / allocatable`` over CPU and memory, × 100;
- BalancedAllocation: ``(1 - |cpu share - memory share| / 2) × 100`` (one minus the standard
  deviation of the two requested shares).

Not modelled: soft constraints (preferred affinities, ``ScheduleAnyway`` spreads, the default
system spreading), image locality and ``PreferNoSchedule`` taints; the real scheduler breaks
ties at random, this one takes the first node in the snapshot's order. Pods that fit no node
wait for in-flight NodeClaims (already capacity: the scheduler binds there once they are
Ready); the rest are stranded. Pods whose own constraints are only satisfiable after others
land (affinity) get more rounds, as the scheduler retries them when the cluster changes.

Pure and deterministic: the caller names the order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import Reuse, build_context
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.results import NewNodeClaim, finalize
from karpenter.core.provisioning.scheduler import Scheduler, _Memo, queue_order
from karpenter.core.provisioning.targets import Existing, try_existing
from karpenter.core.provisioning.topology import PodGroups, Reject
from karpenter.core.provisioning.volumes import PodVolumes

MAX_SCORE = 100.0


@dataclass(frozen=True, slots=True)
class Binding:
    """Where each pod went (its node's name; in-flight NodeClaims count), the stranded, and
    what a provisioning pass would buy for them (``bind(..., buy=True)``)."""

    nodes: dict[str, str]
    stranded: tuple[str, ...]
    claims: tuple[NewNodeClaim, ...] = ()
    homeless: tuple[str, ...] = ()  # stranded pods no new NodeClaim holds either

    @property
    def price(self) -> float:
        """Hourly price of ``claims``."""
        return sum(c.launch.price for c in self.claims)


def score(node: Existing, requests: res.Resources) -> float:
    """The kube-scheduler's resource score of ``node`` with a pod of ``requests`` added."""
    allocatable = node.state.allocatable
    free: list[float] = []
    used: list[float] = []
    for name in (res.CPU, res.MEMORY):
        total = allocatable.get(name, 0)
        if total <= 0:
            continue
        left = node.remaining.get(name, 0) - requests.get(name, 0)
        free.append(max(left, 0) / total)
        used.append(1.0 - max(left, 0) / total)
    if not free:
        return 0.0
    least = sum(free) / len(free) * MAX_SCORE
    balanced = (1.0 - (max(used) - min(used)) / 2.0) * MAX_SCORE
    return least + balanced


class _Binder(Scheduler):
    """The solver's filters with the kube-scheduler's choice: best score, never new capacity
    (until ``buying``: then the provisioner's first fit, new NodeClaims included)."""

    buying = False

    def run(self, pending: Sequence[Pod]) -> dict[str, str]:
        # Preferences only score in the kube-scheduler; they never keep a pod off a node.
        queue = deque(PodWork.of(p, True) for p in pending)
        while queue:
            retry: deque[PodWork] = deque()
            for work in queue:
                if self._try_schedule(work):
                    self._reasons.pop(work.pod.key, None)
                else:
                    retry.append(work)
            if len(retry) == len(queue):
                break
            queue = retry
        return self._reasons

    def _add(self, work: PodWork, volumes: PodVolumes) -> bool:
        if self.buying:
            return super()._add(work, volumes)
        memo = self._memos.get(work.signature)
        if memo is None:
            memo = self._memos[work.signature] = _Memo()
        groups = self._groups_of(work)
        return self._add_existing(work, volumes, groups, memo)

    def _add_existing(
        self, work: PodWork, volumes: PodVolumes, groups: PodGroups, memo: _Memo
    ) -> bool:
        nodes = self.ctx.existing
        excluded = self.ctx.excluded
        best, best_score = -1, -1.0
        for index in self._free.candidates(0, work.pod.requests):
            if index in excluded:
                continue
            node = nodes[index]
            if isinstance(try_existing(node, work, groups, volumes, self.ctx.topology), Reject):
                continue
            value = score(node, work.pod.requests)
            if value > best_score:
                best, best_score = index, value
        if best < 0:
            return False
        self._place_existing(best, work, groups, volumes)
        return True


def bind(
    cluster: Cluster,
    pods: Sequence[Pod],
    options: Options,
    *,
    excluded_nodes: frozenset[str] = frozenset(),
    reuse: Reuse | None = None,
    buy: bool = False,
) -> Binding:
    """Bind ``pods`` (unbound, in the order the kube-scheduler's queue will hold them) on
    ``cluster`` without ``excluded_nodes``, as the kube-scheduler would; with ``buy``, also
    the NodeClaims a provisioning pass would then create for the stranded pods."""
    ctx = build_context(cluster, pods, options, excluded_nodes, reuse)
    binder = _Binder(ctx)
    reasons = binder.run(pods)
    where: dict[str, str] = {}
    for index in sorted(ctx.touched):
        node = ctx.existing[index]
        where.update((p.key, node.state.name) for p in node.pods)
    stranded = [p for p in pods if p.key in reasons and p.key not in where]
    keys = tuple(p.key for p in stranded)
    if not buy or not stranded:
        return Binding(where, keys)
    # The provisioner's pass over what is left pending: largest first, first fit, the room
    # the scheduler left on existing nodes, then new NodeClaims.
    binder.buying = True
    left = binder.run(sorted(stranded, key=queue_order))
    results = finalize(ctx, binder.claims, left)
    return Binding(where, keys, results.new_claims, tuple(sorted(results.unschedulable)))
