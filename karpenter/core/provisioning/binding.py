"""Where the kube-scheduler will bind pods: in arrival order, each on the best-scoring node.

The solver places pods first fit, largest first, and packs them tightly; the kube-scheduler
does neither. It takes pods in the order they reach its queue and binds each to the node that
scores highest among those its filters pass, and with the default profile, for pods that
request CPU and memory and prefer nothing, the scores that differ between nodes are
NodeResourcesFit's ``LeastAllocated``, ``NodeResourcesBalancedAllocation`` and the default
topology spreading: it spreads pods onto the emptiest nodes, and a Deployment's pods onto the
nodes with fewest of them. A plan that counts on the room existing nodes leave being filled as
packed can then strand a pod: the room it was planned into went to others a piece at a time,
and no node has enough left. Consolidation asks this module whether the pods
a command evicts would all find a node (``core/disruption/simulation.py``).

Emulated: the filters are the solver's own (``targets.try_existing``: taints, host ports,
resources, volumes, node selection, required topology spread and pod (anti-)affinity), so
what fits is exactly what the plan assumes; the score is the default profile's, with the pod
added, over the nodes that fit:

- LeastAllocated (weight 1): the mean of ``free / allocatable`` over CPU and memory, × 100;
- BalancedAllocation (weight 1): ``(1 - |cpu share - memory share| / 2) × 100`` (one minus
  the standard deviation of the two requested shares);
- PodTopologySpread (weight 2), for a pod that declares no spread of its own and belongs to a
  ReplicaSet, StatefulSet or ReplicationController: the system default constraints
  (``ScheduleAnyway``, hostname max skew 3, zone max skew 5), its controller's pods on the
  node and in the node's zone, each count weighted by the log of its domain count + 2,
  normalized so the emptiest node scores 100 (over the nodes with room for the pod, where the
  scheduler normalizes over those its filters pass: the same unless a required constraint
  rules out nodes with room). For a Deployment's pods this outweighs the
  resource scores: they spread over the nodes that hold fewest of their ReplicaSet.

Not modelled: declared soft constraints (preferred affinities, ``ScheduleAnyway`` spreads),
Services' selectors in the default spreading, image locality and ``PreferNoSchedule`` taints;
the real scheduler breaks ties at random, this one takes the first node in the snapshot's
order. Pods that fit no node wait for in-flight NodeClaims (already capacity: the scheduler
binds there once they are Ready); the rest are stranded. Pods whose own constraints are only
satisfiable after others land (affinity) get more rounds, as the scheduler retries them when
the cluster changes.

Pure and deterministic: the caller names the order.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import PassContext, Reuse, build_context
from karpenter.core.provisioning.defaultspread import selector_owner
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.results import NewNodeClaim, finalize
from karpenter.core.provisioning.scheduler import Scheduler, _Memo, queue_order
from karpenter.core.provisioning.targets import Existing, try_existing
from karpenter.core.provisioning.topology import PodGroups, Reject
from karpenter.core.provisioning.volumes import PodVolumes

MAX_SCORE = 100.0
# PodTopologySpread's weight in the default profile (the resource scores weigh 1 each).
SPREAD_WEIGHT = 2.0


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


def _spread_key(pod: Pod) -> tuple[str, str, str] | None:
    """Whose pods the kube-scheduler's system default spreading counts for ``pod``: its
    ReplicaSet's (or StatefulSet's, ReplicationController's); None when it declares
    constraints of its own or has no such controller (no default applies)."""
    if pod.topology_spread:
        return None
    owner = selector_owner(pod)
    return None if owner is None else (pod.namespace, owner.kind, owner.name)


def spread_scores(raw: Sequence[float]) -> list[float]:
    """PodTopologySpread's NormalizeScore: the node with the fewest matching pods scores
    100, the most ``100 * min / max``."""
    top, low = max(raw), min(raw)
    if top == 0:
        return [MAX_SCORE] * len(raw)
    return [MAX_SCORE * (top + low - r) / top for r in raw]


class _Binder(Scheduler):
    """The solver's filters with the kube-scheduler's choice: best score, never new capacity
    (until ``buying``: then the provisioner's first fit, new NodeClaims included)."""

    def __init__(self, ctx: PassContext) -> None:
        super().__init__(ctx)
        self.buying = False
        # Matching pods per spread key, per node and per zone (built on first use of a key).
        self._hosts: dict[tuple[str, str, str], Counter[int]] = {}
        self._zones: dict[tuple[str, str, str], Counter[str]] = {}

    def _counts(self, key: tuple[str, str, str]) -> tuple[Counter[int], Counter[str]]:
        hosts = self._hosts.get(key)
        if hosts is None:
            hosts = Counter()
            zones: Counter[str] = Counter()
            for index, node in enumerate(self.ctx.existing):
                if index in self.ctx.excluded:
                    continue
                n = sum(1 for p in node.state.pods if _spread_key(p) == key and p.is_active())
                if n:
                    hosts[index] += n
                    zones[node.state.labels.get(lbl.ZONE, "")] += n
            self._hosts[key], self._zones[key] = hosts, zones
        return hosts, self._zones[key]

    def _place_existing(
        self, index: int, work: PodWork, groups: PodGroups, volumes: PodVolumes
    ) -> None:
        super()._place_existing(index, work, groups, volumes)
        key = _spread_key(work.pod)
        if key is not None and not self.buying:
            hosts, zones = self._counts(key)
            hosts[index] += 1
            zones[self.ctx.existing[index].state.labels.get(lbl.ZONE, "")] += 1

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
        requests = work.pod.requests
        # Scored first (arithmetic), filtered best first: a pod mostly asks the filters
        # (topology, affinity: the dear part) of one node, not of every node with room. The
        # resource-fit index already left out the nodes without room.
        roomy = [i for i in self._free.candidates(0, requests) if i not in excluded]
        if not roomy:
            return False
        values = [score(nodes[i], requests) for i in roomy]
        key = _spread_key(work.pod)
        if key is not None:
            # The system default constraints (ScheduleAnyway, hostname max skew 3, zone max
            # skew 5), plugin weight 2: each domain's matching pods weighted by the log of
            # the domain count (+2), plus max skew - 1.
            hosts, zones = self._counts(key)
            zone_of = [nodes[i].state.labels.get(lbl.ZONE, "") for i in roomy]
            host_weight = math.log(len(roomy) + 2)
            zone_weight = math.log(len(set(zone_of)) + 2)
            raw = [
                round(hosts[i] * host_weight + 2 + zones[z] * zone_weight + 4)
                for i, z in zip(roomy, zone_of, strict=True)
            ]
            spread = spread_scores(raw)
            values = [v + SPREAD_WEIGHT * s for v, s in zip(values, spread, strict=True)]
        topology = self.ctx.topology
        for k in sorted(range(len(roomy)), key=lambda k: (-values[k], k)):
            index = roomy[k]
            if not isinstance(try_existing(nodes[index], work, groups, volumes, topology), Reject):
                self._place_existing(index, work, groups, volumes)
                return True
        return False


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
