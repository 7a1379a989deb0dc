"""One disruption pass over a snapshot: the survey, the budgets and per-pool totals, built once.

Methods read the pass and take from its budgets as they pick candidates; notes collect why
candidates were passed over (the controller turns them into ``Unconsolidatable`` /
``DisruptionBlocked`` events, ``simulate`` prints them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from karpenter.core.disruption import budgets as bud
from karpenter.core.disruption import headroom
from karpenter.core.disruption.bound import Bound, Resume
from karpenter.core.disruption.candidates import (
    Blocked,
    Candidate,
    Survey,
    SurveyMemo,
    eviction_cost,
    in_flight,
    reschedulable,
    state_price,
    survey,
)
from karpenter.core.disruption.retries import FailedSplits
from karpenter.core.disruption.simulation import waiting_pods
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.resources import Resources
from karpenter.core.provisioning.build import Reuse
from karpenter.core.provisioning.existing import StateNode

if TYPE_CHECKING:
    from karpenter.core.disruption.ranking import CandidateIndex
    from karpenter.core.disruption.splitbound import WholeNodes
    from karpenter.core.disruption.verdicts import VerdictMemo


@dataclass(slots=True)
class DisruptionPass:
    """Everything a disruption method needs to decide on one snapshot."""

    cluster: Cluster
    options: Options
    now: float
    survey: Survey
    pools: dict[str, NodePool]
    types_by_pool: dict[str, dict[str, InstanceType]]
    budgets: dict[str, dict[str, int]]
    notes: list[Blocked] = field(default_factory=list)
    _noted: set[str] = field(default_factory=set)
    _totals: dict[str, tuple[float, float]] = field(default_factory=dict)
    # Per-pass memo for derived tables (free capacity per node, ...).
    cache: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    # (cheapest available price, allocatable) of every instance type, cheapest first.
    price_table: list[tuple[float, dict[str, int]]] | None = None
    # Per resource, the largest allocatable among the table's rows up to each one.
    price_reach: dict[str, list[int]] | None = None
    # The cheapest such price per request (sorted items), None when no type holds it.
    holding: dict[tuple[tuple[str, int], ...], float | None] = field(default_factory=dict)
    # Worst launch price per (zone req, capacity-type req), then per instance type identity.
    worst_prices: dict[tuple[object, object], dict[int, float | None]] = field(default_factory=dict)
    # Per candidate: summed pod requests and the pods' request shapes (prefilter).
    pod_shapes: dict[
        str, tuple[dict[str, int], list[tuple[tuple[tuple[str, int], ...], Resources]]]
    ] = field(default_factory=dict)
    # Request shape -> (first nodes with room for it, whether that list is complete).
    # (node names; a plan's world keeps it from pass to pass, ``world``).
    room_for: dict[tuple[tuple[str, int], ...], tuple[list[str], bool]] = field(
        default_factory=dict
    )
    # Solver set-up shared by this pass's simulations (and the next pass's, when carried).
    reuse: Reuse = field(default_factory=Reuse)
    # Set by a plan's world (``world``): the candidates in each method's order, kept between
    # passes, and the verdicts of earlier passes that still hold. Such passes keep no notes.
    index: CandidateIndex | None = None
    verdicts: VerdictMemo | None = None
    # Vertices of the (cpu, memory) per-unit prices every type respects (split.fluid_floor).
    unit_prices: list[tuple[float, float]] | None = None
    # The whole-node bound on splits over this catalogue, with its memo (``splitbound``).
    whole_nodes: WholeNodes | None = None
    # Split simulations this pass may still run (split.SPLITS_PER_PASS: a work limit).
    splits_left: int = 2
    # Splits that failed, kept from pass to pass by the caller (``retries``).
    failed_splits: FailedSplits = field(default_factory=FailedSplits)
    # The caller's bound on each consolidation method's search (``bound``), where a
    # cut-short single-node walk resumes, and the methods this pass's bound cut short.
    bound: Bound | None = None
    resume: Resume = field(default_factory=Resume)
    timeouts: list[str] = field(default_factory=list)

    def over(self, method: str) -> bool:
        """True once the bound says ``method`` must act on what it has (noted once)."""
        if self.bound is None or not self.bound.over():
            return False
        if method not in self.timeouts:
            self.timeouts.append(method)
        return True

    @property
    def states(self) -> list[StateNode]:
        """Every state node of the snapshot."""
        return self.survey.states

    @property
    def candidates(self) -> list[Candidate]:
        """Candidates of every method (each method filters further)."""
        return self.survey.candidates

    def allowed(self, reason: str, pool: str) -> int:
        """Disruptions still allowed for ``reason`` in ``pool`` in this pass."""
        return self.budgets.get(reason, {}).get(pool, bud.UNLIMITED)

    def take(self, reason: str, pool: str) -> bool:
        """Spend one disruption of ``pool`` for ``reason``; False when none is left."""
        left = self.allowed(reason, pool)
        if left <= 0:
            return False
        self.budgets.setdefault(reason, {})[pool] = left - 1
        return True

    def note(self, name: str, reason: str) -> None:
        """Remember why a node was passed over (first reason wins; a world's passes keep no
        notes)."""
        if self.index is None and name not in self._noted:
            self._noted.add(name)
            self.notes.append(Blocked(name, reason))

    def pool_totals(self, pool: str) -> tuple[float, float]:
        """(hourly price, disruption cost) summed over every node of ``pool``."""
        if pool not in self._totals:
            types = self.types_by_pool.get(pool, {})
            price = 0.0
            cost = 0.0
            for s in self.states:
                if s.nodepool != pool:
                    continue
                price += state_price(s, types)
                cost += 1.0 + sum(max(eviction_cost(p), 0.0) for p in s.pods if reschedulable(p))
            self._totals[pool] = (price, cost)
        return self._totals[pool]


def counted(state: StateNode) -> tuple[str, int] | None:
    """(pool, 1 if already disrupting else 0) for a node budgets count, else None."""
    pool = state.nodepool
    if not pool or not state.initialized:
        return None
    if state.claim is not None and state.claim.instance_terminating:
        return None
    return pool, 1 if (in_flight(state) or not state.ready) else 0


def count(counts: dict[str, bud.PoolCount], state: StateNode, sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) one node's share of the budget counts."""
    share = counted(state)
    if share is None:
        return
    pool, disrupting = share
    c = counts.get(pool, bud.PoolCount())
    counts[pool] = bud.PoolCount(c.nodes + sign, c.disrupting + sign * disrupting)


def budget_counts(states: list[StateNode]) -> dict[str, bud.PoolCount]:
    """Managed, initialized nodes per pool, and those already disrupting (deleting, held by an
    in-flight command, or NotReady)."""
    counts: dict[str, bud.PoolCount] = {}
    for s in states:
        count(counts, s, 1)
    return counts


def new_pass(
    cluster: Cluster,
    options: Options,
    now: float,
    *,
    assume_consolidate_after_elapsed: bool = True,
    reuse: Reuse | None = None,
    survey_memo: SurveyMemo | None = None,
    held: Mapping[str, str] | None = None,
    failed_splits: FailedSplits | None = None,
    bound: Bound | None = None,
    resume: Resume | None = None,
) -> DisruptionPass:
    """Survey the snapshot and compute the budgets for one pass (``held``: node → why the
    shell keeps it out of this pass, e.g. backing off after a failed command;
    ``failed_splits``: the splits earlier passes saw fail; ``bound`` and ``resume``: see
    ``bound``)."""
    reuse = reuse or Reuse()
    found = survey(
        cluster,
        now,
        reuse.well_known(cluster, options),
        assume_consolidate_after_elapsed=assume_consolidate_after_elapsed,
        states=reuse.states(cluster),
        memo=survey_memo,
        held=held,
    )
    if cluster.virtual_pods:
        _mark_headroom(found, cluster, options, reuse)
    pools = {p.name: p for p in cluster.nodepools}
    types = {name: {it.name: it for it in its} for name, its in cluster.instance_types.items()}
    allowed = bud.allowances(cluster.nodepools, budget_counts(found.states), now)
    return DisruptionPass(
        cluster,
        options,
        now,
        found,
        pools,
        types,
        allowed,
        reuse=reuse,
        failed_splits=failed_splits if failed_splits is not None else FailedSplits(),
        bound=bound,
        resume=resume if resume is not None else Resume(),
    )


def _mark_headroom(found: Survey, cluster: Cluster, options: Options, reuse: Reuse) -> None:
    """Candidates hosting CapacityBuffer pods carry their count (so they are not empty)."""
    waiting = waiting_pods(cluster, found.states, reuse)
    hosts = headroom.hosting(cluster, options, reuse, waiting).hosts
    if not hosts:
        return
    found.candidates = [
        replace(c, buffer_pods=hosts[c.name]) if c.name in hosts else c for c in found.candidates
    ]
    found.managed = {
        name: replace(c, buffer_pods=hosts[name]) if name in hosts else c
        for name, c in found.managed.items()
    }
