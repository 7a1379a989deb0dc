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
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.node import Node
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import PassContext, Reuse, build_context, extend
from karpenter.core.provisioning.defaultspread import selector_owner
from karpenter.core.provisioning.existing import state_nodes
from karpenter.core.provisioning.podwork import PodWork, standalone
from karpenter.core.provisioning.results import NewNodeClaim, finalize
from karpenter.core.provisioning.scheduler import Scheduler, _Memo, queue_order
from karpenter.core.provisioning.targets import Existing, try_existing
from karpenter.core.provisioning.topology import PodGroups, Reject
from karpenter.core.provisioning.volumes import PodVolumes

if TYPE_CHECKING:
    from numpy.typing import NDArray as _NDArray

    NDArray = _NDArray[Any]
else:
    NDArray = Any

MAX_SCORE = 100.0
# What a node must have room for, in this order (the arrays' columns).
_ROOM = (res.CPU, res.MEMORY, res.PODS)
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


def _spread_key(pod: Pod) -> tuple[str, str, str] | None:
    """Whose pods the kube-scheduler's system default spreading counts for ``pod``: its
    ReplicaSet's (or StatefulSet's, ReplicationController's); None when it declares
    constraints of its own or has no such controller (no default applies)."""
    if pod.topology_spread:
        return None
    owner = selector_owner(pod)
    return None if owner is None else (pod.namespace, owner.kind, owner.name)


class _Binder(Scheduler):
    """The solver's filters with the kube-scheduler's choice: best score, never new capacity
    (until ``buying``: then the provisioner's first fit, new NodeClaims included).

    Scores are computed over every node at once (numpy arrays of allocatable and free CPU,
    memory and pod slots, kept up to date as pods land), then the filters are asked best
    first: a pod mostly meets one node's filters (topology, affinity: the dear part), not
    every node's."""

    def __init__(self, ctx: PassContext, tables: _Tables) -> None:
        import numpy as np  # noqa: PLC0415 - loaded with the first binding, not at start-up

        super().__init__(ctx)
        self.buying = False
        self._np = np
        self._alloc, room, self._zone, self._zone_count, _ = tables
        self._room = room.copy()  # placements change it
        self._usable = np.ones(len(ctx.existing), dtype=bool)
        self._usable[list(ctx.excluded)] = False
        # Matching pods per spread key, per node and per zone (built on first use of a key).
        self._hosts: dict[tuple[str, str, str], NDArray] = {}
        self._zones: dict[tuple[str, str, str], NDArray] = {}

    def _counts(self, key: tuple[str, str, str]) -> tuple[NDArray, NDArray]:
        hosts = self._hosts.get(key)
        if hosts is None:
            np = self._np
            hosts = np.zeros(len(self.ctx.existing), dtype=np.float64)
            for index, node in enumerate(self.ctx.existing):
                if index in self.ctx.excluded:
                    continue
                hosts[index] = sum(
                    1 for p in node.state.pods if _spread_key(p) == key and p.is_active()
                )
            zones = np.bincount(self._zone, weights=hosts, minlength=self._zone_count)
            self._hosts[key], self._zones[key] = hosts, zones
        return hosts, self._zones[key]

    def _place_existing(
        self, index: int, work: PodWork, groups: PodGroups, volumes: PodVolumes
    ) -> None:
        super()._place_existing(index, work, groups, volumes)
        remaining = self.ctx.existing[index].remaining
        self._room[index] = [remaining.get(r, 0) for r in _ROOM]
        key = _spread_key(work.pod)
        if key is not None and not self.buying:
            hosts, zones = self._counts(key)
            hosts[index] += 1
            zones[self._zone[index]] += 1

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
        return self._add_existing(work, volumes, self._groups_of(work), _Memo())

    def _add_existing(
        self, work: PodWork, volumes: PodVolumes, groups: PodGroups, memo: _Memo
    ) -> bool:
        np = self._np
        requests = work.pod.requests
        wanted = np.array([requests.get(r, 0) for r in _ROOM], dtype=np.float64)
        roomy = np.flatnonzero(self._usable & (self._room >= wanted).all(axis=1))
        if roomy.size == 0:
            return False
        values = _resource_scores(np, self._alloc[roomy], self._room[roomy, :2] - wanted[:2])
        key = _spread_key(work.pod)
        if key is not None:
            # The system default constraints (ScheduleAnyway, hostname max skew 3, zone max
            # skew 5), plugin weight 2: each domain's matching pods weighted by the log of
            # the domain count (+2), plus max skew - 1.
            hosts, zones = self._counts(key)
            zone_of = self._zone[roomy]
            host_weight = math.log(roomy.size + 2)
            zone_weight = math.log(np.unique(zone_of).size + 2)
            raw = np.round(hosts[roomy] * host_weight + 2 + zones[zone_of] * zone_weight + 4)
            top, low = raw.max(), raw.min()
            spread = (
                np.full(raw.shape, MAX_SCORE) if top == 0 else MAX_SCORE * (top + low - raw) / top
            )
            values = values + SPREAD_WEIGHT * spread
        nodes, topology = self.ctx.existing, self.ctx.topology
        first = int(np.argmax(values))  # the first of the best: mostly it fits
        best = int(roomy[first])
        if not isinstance(try_existing(nodes[best], work, groups, volumes, topology), Reject):
            self._place_existing(best, work, groups, volumes)
            return True
        for k in np.argsort(-values, kind="stable"):
            if k == first:
                continue
            index = int(roomy[k])
            if not isinstance(try_existing(nodes[index], work, groups, volumes, topology), Reject):
                self._place_existing(index, work, groups, volumes)
                return True
        return False


def _resource_scores(np: Any, alloc: NDArray, left: NDArray) -> NDArray:
    """The resource scores (LeastAllocated + BalancedAllocation, 0-200) of many nodes at once:
    ``alloc`` and ``left`` (free once the pod is added) are (nodes, [cpu, memory]) arrays; a
    resource a node has none of is left out of its score (a node with neither scores 0)."""
    valid = alloc > 0
    free = np.where(valid, np.maximum(left, 0) / np.where(valid, alloc, 1.0), 0.0)
    counted = valid.sum(axis=1)
    least = np.where(counted > 0, free.sum(axis=1) / np.maximum(counted, 1), 0.0) * MAX_SCORE
    used = np.where(valid, 1.0 - free, np.nan)
    spread = np.where(counted == 2, np.abs(used[:, 0] - used[:, 1]), 0.0)
    balanced = np.where(counted > 0, (1.0 - spread / 2.0) * MAX_SCORE, 0.0)
    result: NDArray = least + balanced
    return result


# Per node of a set-up, in its order: allocatable (cpu, memory), free (cpu, memory, pod
# slots), zone code; how many zone codes there are, and the codes by zone.
_Tables = tuple["NDArray", "NDArray", "NDArray", int, dict[str, int]]


def _tables(existing: Sequence[Existing], known: dict[str, int] | None = None) -> _Tables:
    """The binder's arrays for ``existing`` (``known``: zone codes to extend, else new)."""
    import numpy as np  # noqa: PLC0415 - loaded with the first binding, not at start-up

    codes = {} if known is None else dict(known)
    alloc = np.array(
        [[e.state.allocatable.get(r, 0) for r in (res.CPU, res.MEMORY)] for e in existing],
        dtype=np.float64,
    ).reshape(len(existing), 2)
    room = np.array(
        [[e.remaining.get(r, 0) for r in _ROOM] for e in existing], dtype=np.float64
    ).reshape(len(existing), len(_ROOM))
    zones = [codes.setdefault(e.state.labels.get(lbl.ZONE, ""), len(codes)) for e in existing]
    return alloc, room, np.array(zones, dtype=np.int64), max(len(codes), 1), codes


def _plain(pod: Pod) -> bool:
    """Only its CPU, memory and pod slot decide where the pod fits, on any untainted node."""
    return (
        standalone(pod)
        and not pod.node_selector
        and not pod.required_node_terms
        and not pod.ephemeral_volume_count
        and all(name in _ROOM for name in pod.requests)
    )


def _snapshot_tables(cluster: Cluster, reuse: Reuse) -> _Tables:
    """``_tables`` of the snapshot's prototypes, built once per snapshot (each binding copies
    the free room it changes)."""
    existing = reuse.snapshot(cluster).existing
    return reuse.derived(cluster, "binding.tables", lambda: _tables(existing))


def _clean(existing: Sequence[Existing]) -> NDArray:
    """Which nodes of a set-up carry no taint."""
    import numpy as np  # noqa: PLC0415 - loaded with the first binding, not at start-up

    return np.array([not e.taints for e in existing], dtype=bool)


def surely_bound(
    cluster: Cluster,
    pods: Sequence[Pod],
    *,
    excluded_nodes: frozenset[str] = frozenset(),
    reuse: Reuse,
) -> bool:
    """Whether every pod finds a node however the kube-scheduler orders and places them, so
    ``bind`` would strand none; a sufficient test, O(nodes) in numpy against ``bind``'s pass.

    For pods only their requests place (``_plain``) on untainted nodes: with ``S`` what all
    of them request and ``m`` the largest request, a pod is left without a node only if the
    pods before it took more than ``room - m`` of every node's CPU or of its memory. Taking
    ``x`` = that excess of CPU over ``S``'s CPU and ``y`` the same for memory, the pods would
    have to cover ``x`` on some nodes and ``y`` on the rest with less than ``S`` of each:
    ``sum(min(x, y)) < 2``. When the sum over the nodes with room for ``m`` (and a slot for
    every pod) is at least 2, nobody is stranded."""
    if not pods or not all(_plain(p) for p in pods):
        return False
    import numpy as np  # noqa: PLC0415 - loaded with the first binding, not at start-up

    base = reuse.snapshot(cluster)
    room = _snapshot_tables(cluster, reuse)[1]
    usable = reuse.derived(cluster, "binding.clean", lambda: _clean(base.existing)).copy()
    out = [base.index[name] for name in excluded_nodes if name in base.index]
    usable[out] = False
    usable[list(base.dead)] = False
    need = np.array([[p.requests.get(r, 0) for r in _ROOM] for p in pods], dtype=np.float64)
    total, largest = need.sum(axis=0), need.max(axis=0)
    excess = room - largest
    counted = usable & (excess >= 0).all(axis=1) & (room[:, 2] >= total[2])
    shares = [
        excess[counted, k] / total[k] if total[k] > 0 else np.full(int(counted.sum()), np.inf)
        for k in range(2)
    ]
    return bool(np.minimum(shares[0], shares[1]).sum() >= 2.0)


def bind(
    cluster: Cluster,
    pods: Sequence[Pod],
    options: Options,
    *,
    excluded_nodes: frozenset[str] = frozenset(),
    reuse: Reuse | None = None,
    joined: Sequence[Node] = (),
    buy: bool = False,
) -> Binding:
    """Bind ``pods`` (unbound, in the order the kube-scheduler's queue will hold them) on
    ``cluster`` without ``excluded_nodes`` and with the ``joined`` nodes (empty, not in the
    snapshot: a command's replacements), as the kube-scheduler would; with ``buy``, also the
    NodeClaims a provisioning pass would then create for the stranded pods."""
    import numpy as np  # noqa: PLC0415 - loaded with the first binding, not at start-up

    ctx = build_context(cluster, pods, options, excluded_nodes, reuse)
    count = len(ctx.existing)
    tables = _tables(ctx.existing) if reuse is None else _snapshot_tables(cluster, reuse)
    if joined:
        types = {it.name: it for its in cluster.instance_types.values() for it in its}
        alone = replace(cluster, nodes=tuple(joined), nodeclaims=(), pods=())
        extend(ctx, cluster, state_nodes(alone, types))
        more = _tables(ctx.existing[count:], tables[4])
        tables = (
            np.vstack([tables[0], more[0]]),
            np.vstack([tables[1], more[1]]),
            np.concatenate([tables[2], more[2]]),
            more[3],
            more[4],
        )
    binder = _Binder(ctx, tables)
    reasons = binder.run(pods)
    where: dict[str, str] = {}
    for index in sorted(ctx.touched):
        node = ctx.existing[index]
        where.update((p.key, node.state.name) for p in node.pods)
    stranded = [p for p in pods if p.key in reasons and p.key not in where]
    keys = tuple(p.key for p in stranded)
    if not buy or not stranded:
        return Binding(where, keys)
    # The provisioner's pass over what is left pending, largest first: no existing node has
    # room (the binding found none), so in-flight claims of the pass, then new NodeClaims.
    binder.buying = True
    left = binder.run(sorted(stranded, key=queue_order))
    results = finalize(ctx, binder.claims, left)
    return Binding(where, keys, results.new_claims, tuple(sorted(results.unschedulable)))
