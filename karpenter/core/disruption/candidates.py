"""Disruption candidates: which managed nodes may be disrupted, what they cost, what blocks them.

A candidate is a managed, initialized node (a NodeClaim with its Node, or a Node standing for
one) that is not deleting, not already being disrupted (``karpenter.sh/disrupted`` taint), not
nominated for a pending pod and not annotated ``karpenter.sh/do-not-disrupt: "true"``. Its pods
block voluntary disruption when one carries an active ``do-not-disrupt`` annotation (``"true"``,
or a Go duration still running since the pod started) or when PodDisruptionBudgets allow no
eviction of it (a pod under two or more PDBs is blocked, as the eviction API refuses it).

Costs follow upstream: a pod's eviction cost is ``1 + deletion-cost/2^27 + priority/2^25``
clamped to [-10, 10]; a node's reschedule cost is 1 plus the positive eviction costs of its
reschedulable pods (a node at 1.0 counts as empty); consolidation ranks candidates by price
divided by reschedule cost, highest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from karpenter.core.consolidatable import window_start
from karpenter.core.lifecycle import nodepool_hash
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, PodDisruptionBudget
from karpenter.core.model.duration import parse_go_duration
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.existing import StateNode, state_nodes
from karpenter.core.scheduling.requirements import (
    RequirementError,
    Requirements,
    from_selector_terms,
)

# Drift reasons (the NodeClaim Drifted condition's reasons upstream).
DRIFT_NODEPOOL = "NodePoolDrifted"
DRIFT_REQUIREMENTS = "RequirementsDrifted"
DRIFT_INSTANCE_TYPE = "InstanceTypeNotFound"
# The instance-type check only looks at nodes older than this (upstream: 1 h), so a type
# briefly missing from a fresh catalogue does not churn new nodes.
INSTANCE_TYPE_DRIFT_MIN_AGE = 3600.0


def eviction_cost(pod: Pod) -> float:
    """Upstream's per-pod eviction cost from deletion cost and priority, clamped to ±10."""
    cost = 1.0
    raw = pod.annotations.get(lbl.POD_DELETION_COST)
    if raw is not None:
        try:
            cost += int(raw) / 2**27
        except ValueError:
            pass
    cost += pod.priority / 2**25
    return min(max(cost, -10.0), 10.0)


def lifetime_remaining(creation: float, expire_after: float | None, now: float) -> float:
    """The unexpired fraction of a node's lifetime, in [0, 1] (1 without expiry)."""
    if not expire_after:
        return 1.0
    return min(max((expire_after - (now - creation)) / expire_after, 0.0), 1.0)


def reschedulable(pod: Pod) -> bool:
    """Pods that must find a new home when their node goes (not DaemonSet or static pods)."""
    return pod.is_active() and not pod.is_daemonset_pod() and not pod.is_mirror_pod()


def evictable(pod: Pod) -> bool:
    """Pods the drain evicts through the eviction API (PDBs apply to them)."""
    return pod.is_active() and not pod.is_mirror_pod()


def do_not_disrupt_active(pod: Pod, now: float) -> bool:
    """The pod's ``karpenter.sh/do-not-disrupt`` is ``"true"`` or a duration still running."""
    value = pod.annotations.get(lbl.DO_NOT_DISRUPT)
    if value is None:
        return False
    if value == "true":
        return True
    try:
        seconds = parse_go_duration(value)
    except ValueError:
        return False  # upstream ignores an invalid value (and emits an event)
    if seconds <= 0:
        return False
    if pod.start_time is None:
        return True
    return now - pod.start_time < seconds


def pdb_blocker(pod: Pod, pdbs: Sequence[PodDisruptionBudget]) -> str:
    """Why PDBs forbid evicting ``pod`` ("" when they allow it)."""
    matching = [
        b
        for b in pdbs
        if b.namespace == pod.namespace
        and b.selector is not None
        and b.selector.matches(pod.labels)
    ]
    if not matching:
        return ""
    if len(matching) > 1:
        names = ", ".join(f"{b.namespace}/{b.name}" for b in matching)
        return f"pod {pod.key} is matched by more than one PodDisruptionBudget ({names})"
    budget = matching[0]
    if budget.always_allow_unhealthy and not pod.ready:
        return ""
    if budget.disruptions_allowed <= 0:
        return f"PodDisruptionBudget {budget.namespace}/{budget.name} prevents evicting {pod.key}"
    return ""


def pod_blocker(pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget], now: float) -> str:
    """The first pod-level reason the node cannot be voluntarily disrupted ("" when none)."""
    for pod in pods:
        if pod.is_active() and do_not_disrupt_active(pod, now):
            return f"pod {pod.key} has {lbl.DO_NOT_DISRUPT}"
    for pod in pods:
        if evictable(pod):
            reason = pdb_blocker(pod, pdbs)
            if reason:
                return reason
    return ""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A managed node that disruption may act on, with its price and disruption cost."""

    name: str
    state: StateNode
    nodepool: NodePool
    instance_type: InstanceType | None
    zone: str
    capacity_type: str
    price: float
    pods: tuple[Pod, ...]
    reschedule_cost: float
    disruption_cost: float
    creation: float
    expire_after: float | None
    pod_blocker: str = ""
    drift: str = ""
    consolidatable: bool = True
    termination_grace: float | None = None
    buffer_pods: int = 0  # CapacityBuffer virtual pods it hosts (disruption.headroom)

    @property
    def empty(self) -> bool:
        """No reschedulable pod with a positive eviction cost (upstream's IsEmpty) and no
        buffer headroom hosted (upstream's emptiness skips nodes with buffer pods)."""
        return self.reschedule_cost <= 1.0 and not self.buffer_pods

    @property
    def savings_ratio(self) -> float:
        """Price per unit of disruption: consolidation's ranking key (higher first)."""
        return self.price / self.reschedule_cost


@dataclass(frozen=True, slots=True)
class Blocked:
    """A managed node that is not a candidate, and why (machine-readable first word)."""

    name: str
    reason: str


@dataclass(slots=True)
class Survey:
    """Every managed node of a snapshot sorted into candidates and blocked nodes."""

    candidates: list[Candidate] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    states: list[StateNode] = field(default_factory=list)
    # Every managed node with a known NodePool, blocked or not (expiration ignores blockers).
    managed: dict[str, Candidate] = field(default_factory=dict)


def offering_for(it: InstanceType | None, zone: str, capacity_type: str) -> Offering | None:
    """The offering a running node was bought as (its zone and capacity type)."""
    if it is None:
        return None
    for offering in it.offerings:
        if offering.zone == zone and offering.capacity_type == capacity_type:
            return offering
    return None


def state_price(state: StateNode, types: Mapping[str, InstanceType]) -> float:
    """Hourly price of a node from its labels (0 when its offering is unknown)."""
    it = types.get(state.labels.get(lbl.INSTANCE_TYPE, ""))
    offering = offering_for(
        it, state.labels.get(lbl.ZONE, ""), state.labels.get(lbl.CAPACITY_TYPE, "")
    )
    return offering.price if offering is not None else 0.0


def _annotations(state: StateNode) -> dict[str, str]:
    merged: dict[str, str] = {}
    if state.claim is not None:
        merged.update(state.claim.annotations)
    if state.node is not None:
        merged.update(state.node.annotations)
    return merged


def _creation(state: StateNode) -> float:
    if state.claim is not None and state.claim.creation:
        return state.claim.creation
    return state.node.creation if state.node is not None else 0.0


def drift_reason(
    state: StateNode,
    pool: NodePool,
    types: Mapping[str, InstanceType],
    now: float,
) -> str:
    """Why a node no longer matches its NodePool ("" when it does), in upstream's order.

    Requirement drift is strict, as upstream: every NodePool requirement other than NotIn /
    DoesNotExist needs the label on the node with an overlapping value. Well-known labels are
    not exempt (they are exempt only when scheduling a pod onto a new claim, where the label
    will be set at launch), so a requirement added on a label the node lacks drifts it.
    """
    annotations = _annotations(state)
    node_hash = annotations.get(lbl.NODEPOOL_HASH)
    version = annotations.get(lbl.NODEPOOL_HASH_VERSION)
    if (
        node_hash is not None
        and version == lbl.NODEPOOL_HASH_VERSION_CURRENT
        and node_hash != nodepool_hash(pool)
    ):
        return DRIFT_NODEPOOL
    try:
        pool_reqs = from_selector_terms(pool.template.requirements)
    except RequirementError:
        pool_reqs = Requirements()
    if not Requirements.from_labels(state.labels).compatible(pool_reqs, frozenset()):
        return DRIFT_REQUIREMENTS
    if now - _creation(state) >= INSTANCE_TYPE_DRIFT_MIN_AGE:
        it = types.get(state.labels.get(lbl.INSTANCE_TYPE, ""))
        zone = state.labels.get(lbl.ZONE, "")
        ctype = state.labels.get(lbl.CAPACITY_TYPE, "")
        # A reserved node whose reservation ended runs on as on-demand: not drift.
        accepted = {ctype}
        if ctype == lbl.CAPACITY_TYPE_RESERVED:
            accepted.add(lbl.CAPACITY_TYPE_ON_DEMAND)
        if it is None or not any(
            o.zone == zone and o.capacity_type in accepted for o in it.offerings
        ):
            return DRIFT_INSTANCE_TYPE
    # Last, as upstream asks the cloud provider last: its verdict arrives as the claim's
    # Drifted condition (AMI, subnet, security group, NodeClass hash...).
    if state.claim is not None and state.claim.drifted:
        return state.claim.drifted
    return ""


def in_flight(state: StateNode) -> bool:
    """Already on its way out: deleting, or tainted by a disruption command still running.

    The taint is what survives a controller restart, so it (not the controller's memory)
    tells every pass which nodes an in-flight command holds: their pods are counted as moving
    and the nodes count against the disruption budgets, as upstream counts marked nodes.
    """
    return state.deleting or any(t.key == lbl.TAINT_DISRUPTED for t in state.taints)


def _node_blocker(state: StateNode, nominated: frozenset[str]) -> str:
    if not state.initialized:
        return "NotInitialized: node is not initialized"
    if state.deleting:
        return "Deleting: node is being deleted"
    if any(t.key == lbl.TAINT_DISRUPTED for t in state.taints):
        return "Disrupting: node is already being disrupted"
    if state.claim is not None and state.claim.instance_terminating:
        return "Deleting: instance is terminating"
    annotations = _annotations(state)
    if annotations.get(lbl.DO_NOT_DISRUPT) == "true":
        return f"DoNotDisrupt: node has {lbl.DO_NOT_DISRUPT}"
    if state.name in nominated or state.hostname in nominated:
        return "Nominated: node is nominated for a pending pod"
    return ""


def _consolidatable(state: StateNode, pool: NodePool, now: float, assume_elapsed: bool) -> bool:
    after = pool.disruption.consolidate_after
    if after is None:
        return False
    if assume_elapsed:
        return True
    # The Consolidatable condition's clock (last pod event, else the Initialized transition);
    # a Node without a NodeClaim, or a claim whose transition time is unknown, counts from
    # its creation.
    claim = state.claim
    since = window_start(claim) if claim is not None else None
    if since is None:
        since = claim.last_pod_event if claim is not None and claim.last_pod_event else None
    return now >= (since if since is not None else _creation(state)) + after


@dataclass(slots=True)
class SurveyMemo:
    """Candidates of the previous survey, reused for nodes whose objects did not change.

    Valid while the inputs a candidate depends on beyond its own node, claim and pods
    (NodePools, instance types, PDBs, ``now``, labels, drift answers) are the same.
    """

    key: tuple[object, ...] = ()
    holder: Cluster | None = None
    candidates: dict[str, Candidate] = field(default_factory=dict)


def _reusable(
    memo: SurveyMemo | None,
    cluster: Cluster,
    now: float,
    well_known: frozenset[str],
    assume: bool,
    cloud_drift: Mapping[str, str] | None,
) -> dict[str, Candidate]:
    """The memo's candidates when its inputs still hold (and restart the memo)."""
    if memo is None:
        return {}
    key = (
        id(cluster.nodepools),
        id(cluster.instance_types),
        id(cluster.pdbs),
        now,
        well_known,
        assume,
        None if cloud_drift is None else tuple(sorted(cloud_drift.items())),
    )
    known = memo.candidates if memo.key == key else {}
    # Holding the cluster keeps the objects behind those ids alive, so ids stay unique.
    memo.key, memo.holder, memo.candidates = key, cluster, {}
    return known


@dataclass(frozen=True, slots=True)
class SurveyContext:
    """What sorting one node needs beyond its own objects (the same for every node)."""

    cluster: Cluster
    now: float
    pools: Mapping[str, NodePool]
    types_by_pool: Mapping[str, Mapping[str, InstanceType]]
    nominated: frozenset[str]
    assume_consolidate_after_elapsed: bool = True
    cloud_drift: Mapping[str, str] | None = None
    held: Mapping[str, str] | None = None


def survey_context(
    cluster: Cluster,
    now: float,
    *,
    assume_consolidate_after_elapsed: bool = True,
    cloud_drift: Mapping[str, str] | None = None,
    held: Mapping[str, str] | None = None,
) -> SurveyContext:
    """The shared inputs of a survey of ``cluster``."""
    return SurveyContext(
        cluster,
        now,
        {p.name: p for p in cluster.nodepools},
        {name: {it.name: it for it in types} for name, types in cluster.instance_types.items()},
        frozenset(
            p.nominated_node_name for p in cluster.pods if not p.node_name and p.nominated_node_name
        ),
        assume_consolidate_after_elapsed,
        cloud_drift,
        held,
    )


def classify(
    state: StateNode, ctx: SurveyContext, known: Candidate | None = None
) -> tuple[Candidate | None, str]:
    """A node's candidate (None: not managed by a known NodePool) and why it is blocked ("").

    ``known`` is the node's candidate from an earlier survey, reused when built from the
    very same objects (and the survey's other inputs are unchanged: the caller's check).
    """
    pool_name = state.nodepool
    if not pool_name:
        return None, ""
    pool = ctx.pools.get(pool_name)
    if pool is None:
        return None, f"NodePoolNotFound: nodepool {pool_name} not found"
    candidate = known
    if candidate is None or not candidate.state.same_objects(state):
        pool_types = ctx.types_by_pool.get(pool_name, {})
        candidate = _candidate(state, pool, pool_types, ctx.cluster, ctx.now, ctx.cloud_drift)
        ready = _consolidatable(state, pool, ctx.now, ctx.assume_consolidate_after_elapsed)
        candidate = replace(candidate, consolidatable=ready)
    reason = _node_blocker(state, ctx.nominated) or (ctx.held or {}).get(state.name, "")
    return candidate, reason


def survey(
    cluster: Cluster,
    now: float,
    well_known: frozenset[str],
    *,
    assume_consolidate_after_elapsed: bool = True,
    cloud_drift: Mapping[str, str] | None = None,
    states: list[StateNode] | None = None,
    memo: SurveyMemo | None = None,
    held: Mapping[str, str] | None = None,
) -> Survey:
    """Sort the snapshot's managed nodes into candidates and blocked nodes.

    ``cloud_drift`` maps node names to a provider drift reason (the shell asks the cloud);
    ``states`` are the snapshot's state nodes when the caller already has them.
    """
    ctx = survey_context(
        cluster,
        now,
        assume_consolidate_after_elapsed=assume_consolidate_after_elapsed,
        cloud_drift=cloud_drift,
        held=held,
    )
    if states is None:
        all_types: dict[str, InstanceType] = {}
        for types in cluster.instance_types.values():
            for it in types:
                all_types.setdefault(it.name, it)
        states = state_nodes(cluster, all_types)
    out = Survey(states=states)
    known = _reusable(memo, cluster, now, well_known, assume_consolidate_after_elapsed, cloud_drift)
    for state in out.states:
        candidate, reason = classify(state, ctx, known.get(state.name))
        if candidate is None:
            if reason:
                out.blocked.append(Blocked(state.name, reason))
            continue
        if memo is not None:
            memo.candidates[state.name] = candidate
        out.managed[state.name] = candidate
        if reason:
            out.blocked.append(Blocked(state.name, reason))
            continue
        out.candidates.append(candidate)
    return out


def _candidate(
    state: StateNode,
    pool: NodePool,
    types: Mapping[str, InstanceType],
    cluster: Cluster,
    now: float,
    cloud_drift: Mapping[str, str] | None,
) -> Candidate:
    it = types.get(state.labels.get(lbl.INSTANCE_TYPE, ""))
    zone = state.labels.get(lbl.ZONE, "")
    ctype = state.labels.get(lbl.CAPACITY_TYPE, "")
    offering = offering_for(it, zone, ctype)
    pods = tuple(p for p in state.pods if reschedulable(p))
    costs = [eviction_cost(p) for p in pods]
    creation = _creation(state)
    claim = state.claim
    expire_after = claim.expire_after if claim is not None else pool.template.expire_after
    active = [p for p in state.pods if p.is_active()]
    drift = drift_reason(state, pool, types, now)
    if not drift and cloud_drift:
        drift = cloud_drift.get(state.name, "")
    return Candidate(
        name=state.name,
        state=state,
        nodepool=pool,
        instance_type=it,
        zone=zone,
        capacity_type=ctype,
        price=offering.price if offering is not None else 0.0,
        pods=pods,
        reschedule_cost=1.0 + sum(max(c, 0.0) for c in costs),
        disruption_cost=sum(eviction_cost(p) for p in active)
        * lifetime_remaining(creation, expire_after, now),
        creation=creation,
        expire_after=expire_after,
        pod_blocker=pod_blocker(state.pods, cluster.pdbs, now),
        drift=drift,
        termination_grace=(
            claim.termination_grace_seconds
            if claim is not None
            else pool.template.termination_grace_seconds
        ),
    )
