"""A plan's snapshot, carried from command to command instead of rebuilt for every pass.

``planner.plan`` applies one command per pass. Rebuilding what a pass reads (state nodes, the
survey, the budgets' node counts, the solver's set-up, the prefilter's free-room table, the
candidate orders) costs O(nodes + pods) per command: most of a 10,000-node plan's time. The
world applies each command to those structures instead, touching only the nodes that left,
the nodes that received pods and the replacements that joined; each structure is the one a
fresh pass would build. The verdict memo (``verdicts``) hears of every change, so its answers
stay exact. A command that leaves pods pending (expiration, drift) changes what every what-if
schedules: the world then rebuilds from the snapshot and forgets every verdict.
"""

from __future__ import annotations

from dataclasses import replace

from karpenter.core.disruption import budgets as bud
from karpenter.core.disruption.candidates import (
    Blocked,
    Candidate,
    Survey,
    SurveyContext,
    classify,
    in_flight,
    reschedulable,
    survey,
    survey_context,
)
from karpenter.core.disruption.commands import Command, destination
from karpenter.core.disruption.context import DisruptionPass, budget_counts, count
from karpenter.core.disruption.ranking import CandidateIndex
from karpenter.core.disruption.retries import FailedSplits
from karpenter.core.disruption.simulation import pending_pods, replacement_node
from karpenter.core.disruption.splitbound import WholeNodes
from karpenter.core.disruption.verdicts import FAR, Order, Shape, VerdictMemo, order, room_for
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node
from karpenter.core.model.pod import Pod
from karpenter.core.model.resources import Resources
from karpenter.core.provisioning import rebase
from karpenter.core.provisioning.build import Reuse
from karpenter.core.provisioning.existing import StateNode, state_nodes
from karpenter.core.provisioning.podwork import unconstrained

# Per-snapshot values (``Reuse.derived``) of the disruption code that stay true for every
# node a command did not touch: carried over by the world (see ``_rederive``).
_UNBOUND = "disruption.unbound:"
_CARRIED = ("disruption.waiting", "prefilter.spot")
Shapes = tuple[dict[str, int], list[tuple[tuple[tuple[str, int], ...], Resources]]]


def _all_types(cluster: Cluster) -> dict[str, InstanceType]:
    out: dict[str, InstanceType] = {}
    for types in cluster.instance_types.values():
        for it in types:
            out.setdefault(it.name, it)
    return out


class World:
    """The snapshot after every command so far, with what passes read kept up to date."""

    def __init__(self, cluster: Cluster, options: Options, now: float) -> None:
        self.options = options
        self.now = now
        self.reuse = Reuse()
        self.memo = VerdictMemo()
        self.failed_splits = FailedSplits()
        self._load(cluster)

    def _load(self, cluster: Cluster) -> None:
        """Build everything from ``cluster`` (and forget every verdict)."""
        self.cluster = cluster
        self.memo.clear()
        every = self.reuse.states(cluster)
        self.states = {s.name: s for s in every}
        well_known = self.reuse.well_known(cluster, self.options)
        found = survey(cluster, self.now, well_known, states=every)
        self.ctx: SurveyContext = survey_context(cluster, self.now)
        self.types = {k: dict(v) for k, v in self.ctx.types_by_pool.items()}
        self.candidates = {c.name: c for c in found.candidates}
        self.blocked = {b.name: b for b in found.blocked}
        self.managed = dict(found.managed)
        self.index = CandidateIndex(found.candidates, found.managed.values())
        self.memo.watcher = self.index
        self.counts = budget_counts(every)
        self.nodes = {n.name: n for n in cluster.nodes}
        # Node names are unique in a cluster; a snapshot where they are not takes the slow path.
        self._unique = len(self.nodes) == len(cluster.nodes)
        self.pods: list[Pod] = list(cluster.pods)
        self.by_node: dict[str, list[int]] = {}
        for i, pod in enumerate(self.pods):
            if pod.node_name:
                self.by_node.setdefault(pod.node_name, []).append(i)
        base = self.reuse.snapshot(cluster)
        self.free: dict[str, dict[str, int]] = {
            e.state.name: res.floor_zero(e.remaining) for e in base.existing
        }
        self.free["__total__"] = res.add(*self.free.values())
        self.pod_shapes: dict[str, Shapes] = {}
        self.room_for: dict[Shape, tuple[list[str], bool]] = {}
        self.price_table: list[tuple[float, dict[str, int]]] | None = None
        self.price_reach: dict[str, list[int]] | None = None
        self.unit_prices: list[tuple[float, float]] | None = None
        self.whole_nodes: WholeNodes | None = None
        self.worst_prices: dict[tuple[object, object], dict[int, float | None]] = {}
        self.holding: dict[tuple[tuple[str, int], ...], float | None] = {}
        self.initialized = {s.name: s.initialized for s in every}
        self._static_ok = not any(p.limits for p in cluster.nodepools) and not any(
            o.capacity_type == lbl.CAPACITY_TYPE_RESERVED
            for types in cluster.instance_types.values()
            for it in types
            for o in it.offerings
        )
        waiting = pending_pods(cluster) + [
            p for s in every if s.deleting for p in s.pods if reschedulable(p)
        ]
        self._waiting_ok = all(unconstrained(p) for p in waiting)
        self._in_flight = any(in_flight(s) for s in every)

    # ---- a pass ---------------------------------------------------------------------------
    def next_pass(self) -> DisruptionPass:
        """A pass over the current snapshot, sharing the world's structures."""
        every = list(self.states.values())
        found = Survey(
            list(self.candidates.values()), list(self.blocked.values()), every, self.managed
        )
        allowed = bud.allowances(self.cluster.nodepools, self.counts, self.now)
        ps = DisruptionPass(
            self.cluster,
            self.options,
            self.now,
            found,
            dict(self.ctx.pools),
            self.types,
            allowed,
            reuse=self.reuse,
            index=self.index,
            verdicts=self.memo,
            failed_splits=self.failed_splits,
        )
        ps.cache["free"] = self.free
        ps.pod_shapes = self.pod_shapes
        ps.room_for = self.room_for
        ps.price_table = self.price_table
        ps.price_reach = self.price_reach
        ps.unit_prices = self.unit_prices
        ps.whole_nodes = self.whole_nodes
        ps.worst_prices = self.worst_prices
        ps.holding = self.holding
        anti = self.reuse.snapshot(self.cluster).anti_owners
        ok = self._static_ok and self._waiting_ok and not anti
        if self.memo.whatifs_ok and not ok:
            self.memo.clear()
        self.memo.whatifs_ok = ok
        return ps

    def passed(self, ps: DisruptionPass) -> None:
        """Keep what the pass computed once for good (the prefilter's price table, the
        split bounds' tables: they depend on the instance types alone)."""
        self.price_table = ps.price_table
        self.price_reach = ps.price_reach
        self.unit_prices = ps.unit_prices
        self.whole_nodes = ps.whole_nodes

    # ---- a command ------------------------------------------------------------------------
    def apply(self, command: Command, names: tuple[str, ...]) -> None:
        """Carry out ``command`` (its replacements named ``names``) on the snapshot."""
        gone = [c.state for c in command.candidates]
        node_names = {s.node.name for s in gone if s.node is not None}
        claim_names = {s.claim.name for s in gone if s.claim is not None}
        moves = dict(command.moves)
        destinations = {key: destination(t, names) for key, t in moves.items()}
        new_nodes = [
            replacement_node(claim, name, self.cluster, self.now)
            for claim, name in zip(command.replacements, names, strict=True)
        ]
        received, dropped, pending = self._move_pods(node_names, destinations)
        pods = (
            tuple(p for i, p in enumerate(self.pods) if i not in dropped)
            if dropped
            else tuple(self.pods)
        )
        if self._unique:
            for name in node_names:
                del self.nodes[name]
            self.nodes.update((n.name, n) for n in new_nodes)
            nodes = tuple(self.nodes.values())
        else:
            nodes = (*(n for n in self.cluster.nodes if n.name not in node_names), *new_nodes)
        cluster = replace(
            self.cluster,
            nodes=nodes,
            nodeclaims=(
                tuple(c for c in self.cluster.nodeclaims if c.name not in claim_names)
                if claim_names
                else self.cluster.nodeclaims
            ),
            pods=pods,
        )
        if pending or dropped or self._in_flight:
            # Pods went back to pending (or commands are in flight): what every what-if
            # schedules changed, so nothing computed on the old snapshot is kept.
            self.reuse = Reuse()
            self._load(cluster)
            return
        self._advance(cluster, gone, received, new_nodes)

    def _move_pods(
        self, node_names: set[str], destinations: dict[str, str]
    ) -> tuple[list[str], set[int], bool]:
        """Rebind the pods of the nodes that go; returns the nodes that received pods, the
        pods that went away with their node and whether any pod went back to pending."""
        received: dict[str, None] = {}
        dropped: set[int] = set()
        pending = False
        for name in sorted(node_names):
            for i in self.by_node.pop(name, []):
                pod = self.pods[i]
                dest = destinations.get(pod.key)
                if dest is not None:
                    self.pods[i] = replace(pod, node_name=dest)
                    self.by_node.setdefault(dest, []).append(i)
                    received[dest] = None
                elif reschedulable(pod):
                    self.pods[i] = replace(pod, node_name="", nominated_node_name="")
                    pending = True
                else:
                    dropped.add(i)  # DaemonSet and static pods go with their node
        for dest in received:
            self.by_node[dest].sort()
        return list(received), dropped, pending

    def _advance(
        self, cluster: Cluster, gone: list[StateNode], received: list[str], new_nodes: list[Node]
    ) -> None:
        removed = [s.name for s in gone]
        changed = []
        for name in received:
            old = self.states.get(name)
            # A state's pods are its Node's (a NodeClaim without a Node holds none).
            if old is not None and old.node is not None and old.node.name == name:
                changed.append(replace(old, pods=tuple(self.pods[i] for i in self.by_node[name])))
        joined = state_nodes(
            replace(
                cluster,
                nodes=tuple(new_nodes),
                nodeclaims=(),
                pods=tuple(self.pods[i] for n in new_nodes for i in self.by_node.get(n.name, ())),
            ),
            _all_types(cluster),
        )
        self._restate(gone, changed, joined)
        self.cluster = cluster
        self.ctx = replace(self.ctx, cluster=cluster)
        carried = self._carried(removed, [s.name for s in changed])
        base = rebase.advance(
            self.reuse, cluster, list(self.states.values()), removed, changed, joined
        )
        base.derived.update(carried)
        self._refree(removed, [*changed, *joined])
        self._reroom([*removed, *(s.name for s in changed)], [s.name for s in joined])
        self.memo.nodes_changed([*removed, *(s.name for s in changed)])
        for state in joined:
            e = base.existing[base.index[state.name]]
            self.memo.node_joined(order(state), e.remaining)
        self.memo.totals_changed(self.free["__total__"])

    def _restate(
        self, gone: list[StateNode], changed: list[StateNode], joined: list[StateNode]
    ) -> None:
        """State nodes, survey, orders and budget counts after the command."""
        for state in gone:
            count(self.counts, self.states.pop(state.name), -1)
            self._unsurvey(state.name)
        for state in changed:
            count(self.counts, self.states[state.name], -1)
            self.states[state.name] = state
            count(self.counts, state, 1)
            self._unsurvey(state.name)
            self._survey(state)
        for state in joined:
            self.states[state.name] = state
            count(self.counts, state, 1)
            self._survey(state)
        for state in [*gone, *changed]:
            self.pod_shapes.pop(state.name, None)
            self.initialized.pop(state.name, None)
        for state in [*changed, *joined]:
            self.initialized[state.name] = state.initialized

    def _unsurvey(self, name: str) -> None:
        c = self.candidates.pop(name, None)
        if c is not None:
            self.index.remove(c)
        self.blocked.pop(name, None)
        m = self.managed.pop(name, None)
        if m is not None:
            self.index.remove_managed(m)

    def _survey(self, state: StateNode) -> None:
        candidate, reason = classify(state, self.ctx)
        if candidate is None:
            if reason:
                self.blocked[state.name] = Blocked(state.name, reason)
            return
        self.managed[state.name] = candidate
        self.index.add_managed(candidate)
        if reason:
            self.blocked[state.name] = Blocked(state.name, reason)
            return
        self.candidates[state.name] = candidate
        self.index.add(candidate)

    def _carried(self, removed: list[str], changed: list[str]) -> dict[str, object]:
        """The old snapshot's derived values that hold on the new one."""
        old = self.reuse.base.derived if self.reuse.base is not None else {}
        touched = {f"{_UNBOUND}{name}" for name in [*removed, *changed]}
        carried = {
            k: v
            for k, v in old.items()
            if (k.startswith(_UNBOUND) and k not in touched) or k in _CARRIED
        }
        carried["disruption.initialized"] = self.initialized
        return carried

    def _reroom(self, touched: list[str], joined: list[str]) -> None:
        """The prefilter's first nodes with room per pod shape (in pass order), after the
        command. Nodes that left or lost all room for a shape leave its list; what is left is
        still the first nodes with room (a node ahead of one of them had no room, and has no
        more now), complete if it was. Joined nodes with room join complete lists, and a
        prefix where they come before its end. The prefilter scans again when a prefix gets
        too short to answer."""
        if not self._unique:
            self.room_for.clear()
            return
        gone = set(touched)
        for shape, (found, complete) in list(self.room_for.items()):
            requests = dict(shape)
            kept = [n for n in found if n not in gone or room_for(requests, self.free.get(n, {}))]
            new = [n for n in joined if room_for(requests, self.free[n])]
            if new and not complete:
                last = self._order(kept[-1]) if kept else FAR
                new = [n for n in new if kept and self._order(n) < last]
            if new or len(kept) < len(found):
                self.room_for[shape] = (sorted([*kept, *new], key=self._order), complete)

    def _order(self, name: str) -> Order:
        return order(self.states[name])

    def _refree(self, removed: list[str], updated: list[StateNode]) -> None:
        """The prefilter's free room per node and in total, after the command."""
        base = self.reuse.snapshot(self.cluster)
        total = self.free["__total__"]
        for name in removed:
            total = res.subtract(total, self.free.pop(name, {}))
        for state in updated:
            e = base.existing[base.index[state.name]]
            room = res.floor_zero(e.remaining)
            total = res.add(res.subtract(total, self.free.get(state.name, {})), room)
            self.free[state.name] = room
        self.free["__total__"] = total


def candidates_of(world: World) -> list[Candidate]:
    """The world's candidates in survey order (tests compare them with a fresh survey)."""
    return list(world.candidates.values())
