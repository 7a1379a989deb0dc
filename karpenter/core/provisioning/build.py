"""Setting up a provisioning pass: templates, existing capacity, topology, volumes and limits.

Everything here is computed once per pass from the snapshot, so the scheduling loop only does
incremental work. NodePools are ordered by weight (highest first), ties by name descending, as
upstream does; pools that are not ready, are being deleted, are static, or whose types all fail
the template's requirements are left out of the pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, DaemonSet, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.catalog import CapacityIndex, Catalog
from karpenter.core.provisioning.daemons import daemon_alternatives, groups_for_template
from karpenter.core.provisioning.existing import StateNode, state_nodes
from karpenter.core.provisioning.freeindex import FreeIndex
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.targets import Claim, Existing, Template
from karpenter.core.provisioning.topology import (
    AFFINITY,
    ANTI_AFFINITY,
    SPREAD,
    Group,
    PodGroups,
    Topology,
)
from karpenter.core.provisioning.volumes import VolumeError, VolumeIndex
from karpenter.core.scheduling.requirements import Requirement, Requirements, from_selector_terms
from karpenter.core.scheduling.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, untolerated

T = TypeVar("T")

# Placeholders so DaemonSets with affinity to these labels count as running on new nodes;
# stripped from the NodeClaim that is created.
PLACEHOLDER_KEYS = frozenset({lbl.REGISTERED, lbl.INITIALIZED})


def well_known_labels(cluster: Cluster, options: Options) -> frozenset[str]:
    """Upstream's well-known labels plus every key an instance type's requirements name."""
    keys = set(lbl.WELL_KNOWN_LABELS) | set(options.extra_well_known_labels)
    for types in cluster.instance_types.values():
        for it in types:
            keys.update(it.requirements)
    return frozenset(keys)


def template_requirements(pool: NodePool) -> Requirements:
    """Template requirements ∩ template labels ∩ the pool's own label (+ placeholders)."""
    reqs = from_selector_terms(pool.template.requirements)
    labels = dict(pool.template.labels)
    labels[lbl.NODEPOOL] = pool.name
    reqs = reqs.intersect(Requirements.from_labels(labels))
    return reqs.intersect(
        Requirements(Requirement(k, False, frozenset(("true",))) for k in sorted(PLACEHOLDER_KEYS))
    )


def ordered_pools(pools: Sequence[NodePool]) -> list[NodePool]:
    """Ready, live, dynamic pools by weight desc, then name desc."""
    live = [p for p in pools if p.ready and not p.deleting and p.replicas is None]
    live.sort(key=lambda p: p.name, reverse=True)
    live.sort(key=lambda p: p.weight, reverse=True)
    return live


@dataclass(slots=True)
class Limits:
    """Remaining NodePool limits, counting new claims at the largest type they may become.

    The claims of the pass are counted as they change (``commit``), so asking what a new
    claim may use costs the same with 10 claims as with 20,000.
    """

    limits: Mapping[str, res.Resources]
    used: dict[str, dict[str, int]]
    nodes_used: dict[str, int]
    _caps: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)
    # id(claim) -> (claim, the mask counted for it); the claim is kept so its id stays unique
    _counted: dict[int, tuple[Claim, int]] = field(default_factory=dict)

    def commit(self, claim: Claim) -> None:
        """Count ``claim`` (new, or with a narrower mask than when last counted)."""
        template = claim.template
        pool = template.nodepool.name
        limits = self.limits.get(pool)
        if not limits:
            return
        names = [n for n in limits if n != res.NODES]
        used = self.used.setdefault(pool, {})
        counted = self._counted.get(id(claim))
        if counted is None:
            self.nodes_used[pool] = self.nodes_used.get(pool, 0) + 1
        else:
            for name, value in self._claim_capacity(template, counted[1], names).items():
                used[name] = used.get(name, 0) - value
        for name, value in self._claim_capacity(template, claim.mask, names).items():
            used[name] = used.get(name, 0) + value
        self._counted[id(claim)] = (claim, claim.mask)

    def save(self) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """The usage counted so far (``restore`` puts it back, forgetting later claims)."""
        return {pool: dict(used) for pool, used in self.used.items()}, dict(self.nodes_used)

    def restore(self, saved: tuple[dict[str, dict[str, int]], dict[str, int]]) -> None:
        """Usage as ``save`` found it; claims counted since are forgotten."""
        used, nodes_used = saved
        self.used = {pool: dict(values) for pool, values in used.items()}
        self.nodes_used = dict(nodes_used)
        self._counted.clear()

    def mask(self, template: Template) -> int:
        """Types a new claim of this pool may still use (-1: all, 0: none)."""
        pool = template.nodepool.name
        limits = self.limits.get(pool)
        if not limits:
            return -1
        if res.NODES in limits and self.nodes_used.get(pool, 0) + 1 > limits[res.NODES] // 1000:
            return 0
        used = self.used.get(pool, {})
        remaining = {n: limits[n] - used.get(n, 0) for n in limits if n != res.NODES}
        return template.capacity.within(remaining)

    def _claim_capacity(self, template: Template, mask: int, names: list[str]) -> dict[str, int]:
        key = (template.index, mask)
        caps = self._caps.get(key)
        if caps is None:
            caps = template.capacity.max_capacity(template.catalog.indices(mask), names)
            self._caps[key] = caps
        return caps

    def exceeded(self, template: Template, fit: int) -> list[str]:
        """Limited resources that no fitting type stays within (for reasons)."""
        pool = template.nodepool.name
        limits = self.limits.get(pool) or {}
        used = self.used.get(pool, {})
        out = []
        for name, limit in sorted(limits.items()):
            if name == res.NODES:
                if self.nodes_used.get(pool, 0) + 1 > limit // 1000:
                    out.append(f"{name}={limit // 1000}")
                continue
            if not fit & template.capacity.within({name: limit - used.get(name, 0)}):
                out.append(f"{name}={res.describe({name: limit}).split('=')[1]}")
        return out


@dataclass(slots=True)
class PassContext:
    """Everything a pass needs, built once from the snapshot."""

    options: Options
    templates: list[Template]
    existing: list[Existing]
    topology: Topology
    volumes: VolumeIndex
    limits: Limits
    well_known: frozenset[str]
    prefer_no_schedule_pools: bool
    skipped_pools: dict[str, str]
    excluded: frozenset[int]  # indexes into ``existing`` this pass must not use
    free: FreeIndex
    existing_index: Mapping[str, int]  # node (or in-flight claim) name → index in ``existing``
    # Indexes of ``existing`` the pass copied to place pods on (the only ones holding pods:
    # results read these, not every node of the snapshot).
    touched: set[int] = field(default_factory=set)

    def pod_groups(self, work: PodWork) -> PodGroups:
        """The topology groups a pod must satisfy in its current relaxation state."""
        pod = work.pod
        topo = self.topology
        owned = []
        if work.spreads:  # the filter is only read by spreads (built per call: not cheap)
            node_filter = work.node_filter()
            for tsc in work.spreads:
                group = topo.spread_group(pod, tsc, node_filter)
                owned.append((group, group.selects(pod)))
        affinity = [*pod.required_affinity, *(w.term for w in work.preferred_affinity)]
        for term in affinity:
            group = topo.term_group(pod, term, AFFINITY)
            owned.append((group, group.selects(pod)))
        anti = [*pod.required_anti_affinity, *(w.term for w in work.preferred_anti)]
        for term in anti:
            group = topo.term_group(pod, term, ANTI_AFFINITY)
            owned.append((group, group.selects(pod)))
        inverse_owned = [topo.inverse_group(pod, t) for t in pod.required_anti_affinity]
        return PodGroups(owned, topo.selecting(pod)[1], inverse_owned)


def _templates(
    cluster: Cluster, options: Options, well_known: frozenset[str]
) -> tuple[list[Template], dict[str, str]]:
    templates: list[Template] = []
    skipped: dict[str, str] = {}
    for pool in ordered_pools(cluster.nodepools):
        types = cluster.instance_types.get(pool.name, ())
        catalog = Catalog(types)
        reqs = template_requirements(pool)
        base = catalog.compatible(reqs) if types else 0
        if not base:
            skipped[pool.name] = "no instance type satisfies the NodePool's requirements"
            continue
        groups = groups_for_template(
            catalog, reqs, pool.template.taints, cluster.daemonsets, well_known
        )
        template = Template(
            len(templates),
            pool,
            catalog,
            CapacityIndex(types),
            reqs,
            pool.template.taints,
            groups,
            base,
            well_known,
            options.min_values_policy != "BestEffort",
        )
        if options.min_values_policy != "BestEffort" and not template.min_values_ok(reqs, base):
            skipped[pool.name] = "minValues cannot be met by the NodePool's instance types"
            continue
        templates.append(template)
    return templates, skipped


def _daemon_overhead(
    state: StateNode, taints: Sequence[Taint], daemonsets: Sequence[DaemonSet]
) -> dict[str, int]:
    """Requests of daemons that would run on the node but have no pod there yet."""
    present = {o.name for p in state.pods for o in p.owners if o.kind == "DaemonSet"}
    reqs = state.requirements
    missing = []
    for ds in daemonsets:
        if ds.name in present or untolerated(taints, ds.template.tolerations, include_prefer=False):
            continue
        if any(reqs.compatible(alt, frozenset()) for alt in daemon_alternatives(ds.template)):
            missing.append(ds.template.requests)
    return res.add(*missing)


def _existing(
    cluster: Cluster,
    states: Sequence[StateNode],
    volumes: VolumeIndex,
    memo: dict[str, Existing] | None = None,
) -> list[Existing]:
    limits = {c.name: dict(c.limits) for c in cluster.csinodes}
    out = []
    for state in states:
        if memo is not None:
            known = memo.get(state.name)
            if known is not None and known.state.same_objects(state):
                out.append(known)
                continue
        taints = state.scheduling_taints()
        if state.node is not None and state.node.unschedulable:
            taints = (*taints, Taint("node.kubernetes.io/unschedulable", NO_SCHEDULE))
        remaining = res.subtract(state.allocatable, state.requested())
        remaining = res.subtract(remaining, _daemon_overhead(state, taints, cluster.daemonsets))
        used: dict[str, set[str]] = {}
        for pod in state.pods:
            if not pod.is_active():
                continue
            try:
                for driver, names in volumes.resolve(pod).by_driver.items():
                    used.setdefault(driver, set()).update(names)
            except VolumeError:
                continue
        out.append(
            Existing(
                state,
                state.requirements,
                taints,
                remaining,
                [hp for p in state.pods if p.is_active() for hp in p.host_ports],
                used,
                limits.get(state.name, {}),
            )
        )
    return out


def _template_domains(
    t: Template, keys: set[str], universe: dict[str, dict[str, list[tuple[Taint, ...]]]]
) -> None:
    for key in keys:
        tmpl = t.requirements.get(key)
        values: set[str] = set()
        for index in t.catalog.indices(t.base_mask):
            req = t.catalog.requirements[index].get(key)
            if req is not None and not req.complement:
                values |= {v for v in req.values if tmpl is None or tmpl.has(v)}
        if tmpl is not None and not tmpl.complement:
            values |= tmpl.values
        for value in sorted(values):
            universe[key].setdefault(value, []).append(t.taints)


def _universe(
    topology: Topology,
    templates: Sequence[Template],
    existing: Sequence[Existing],
    out: frozenset[int],
) -> None:
    """Every domain of every topology key in play, with the taints reachable there (nodes
    at the ``out`` indexes left out)."""
    keys = {g.key for g in [*topology.groups.values(), *topology.inverse.values()]}
    keys.discard(lbl.HOSTNAME)
    universe: dict[str, dict[str, list[tuple[Taint, ...]]]] = {k: {} for k in keys}
    if not keys:
        topology.universe = universe
        return
    for t in templates:
        _template_domains(t, keys, universe)
    for node in (e for i, e in enumerate(existing) if i not in out):
        for key in keys:
            value = node.state.labels.get(key)
            if value is not None:
                universe[key].setdefault(value, []).append(node.taints)
    topology.universe = universe


@dataclass(slots=True)
class _Base:
    """Pass-independent set-up of one snapshot, kept while the snapshot is the same object.

    Existing nodes are prototypes in pass order; a pass copies one only when it places a pod
    there, and leaves excluded nodes (disruption candidates) in place but unused, so indexes,
    the free-capacity index and the per-node contributions below stay valid for every pass.
    """

    cluster: Cluster
    states: list[StateNode]
    existing: list[Existing]
    index: dict[str, int]
    volumes: VolumeIndex
    free: FreeIndex
    bound_pods: list[list[Pod]] | None  # active pods per node, built when topology needs them
    anti_owners: list[tuple[int, Pod]]
    pool_used: dict[str, dict[str, int]]
    pool_nodes: dict[str, int]
    # Group identity -> (counts over every node, {node index: domains it adds}).
    seeds: dict[tuple[object, ...], tuple[dict[str, int], dict[int, list[str]]]] = field(
        default_factory=dict
    )
    derived: dict[str, object] = field(default_factory=dict)
    # Indexes of nodes that left the snapshot since this set-up was built (``rebase``): their
    # slots stay, with no room in ``free``, and every pass leaves them out like candidates.
    dead: frozenset[int] = frozenset()

    @property
    def bound(self) -> list[list[Pod]]:
        """Active pods per node (in ``existing`` order)."""
        if self.bound_pods is None:
            self.bound_pods = [[p for p in s.pods if p.is_active()] for s in self.states]
        return self.bound_pods


def _base(
    cluster: Cluster,
    every: list[StateNode] | None = None,
    memo: dict[str, Existing] | None = None,
) -> _Base:
    states = _live_states(cluster, every)
    volumes = VolumeIndex(cluster)
    existing = _existing(cluster, states, volumes, memo)
    used: dict[str, dict[str, int]] = {}
    nodes: dict[str, int] = {}
    for state in states:
        if state.nodepool:
            used[state.nodepool] = res.add(used.get(state.nodepool, {}), state.capacity)
            nodes[state.nodepool] = nodes.get(state.nodepool, 0) + 1
    return _Base(
        cluster,
        states,
        existing,
        {s.name: i for i, s in enumerate(states)},
        volumes,
        FreeIndex([e.remaining for e in existing]),
        None,
        [
            (i, p)
            for i, s in enumerate(states)
            for p in s.pods
            if p.required_anti_affinity and p.is_active()
        ],
        used,
        nodes,
    )


def _found(
    base: _Base, topology: Topology, identity: tuple[object, ...], group: Group, inverse: bool
) -> Iterator[tuple[int, list[str]]]:
    """Per node, the domains its bound pods add to a group (owners, for inverse groups)."""
    for index, pods in enumerate(base.bound):
        node = base.existing[index]
        if (
            not inverse
            and group.kind == SPREAD
            and not group.counts_on(node.requirements, node.taints)
        ):
            continue
        hostname = node.state.hostname
        found: list[str] = []
        for pod in pods:
            if inverse:
                hits = sum(
                    topology.inverse_identity(pod, term) == identity
                    for term in pod.required_anti_affinity
                )
            else:
                hits = 1 if group.selects(pod) else 0
            for _ in range(hits):
                found += topology.domains_for_record(group, node.requirements, hostname)
        if found:
            yield index, found


def _seed(
    base: _Base, topology: Topology, identity: tuple[object, ...], group: Group, inverse: bool
) -> tuple[dict[str, int], dict[int, list[str]]]:
    """Where a group's pods already are, over every node of the snapshot."""
    counts: dict[str, int] = {}
    per_node = dict(_found(base, topology, identity, group, inverse))
    for found in per_node.values():
        for domain in found:
            counts[domain] = counts.get(domain, 0) + 1
    return counts, per_node


_EXISTING_INPUTS = ("daemonsets", "pvcs", "pvs", "storage_classes", "csinodes", "instance_types")


@dataclass(slots=True)
class Reuse:
    """A memo for many passes over related snapshots (disruption's what-if simulations).

    Templates (catalog indexes, daemon groups) are kept while the NodePools, instance types,
    DaemonSets and options are the very same objects; the snapshot's existing capacity, its
    free-capacity index, limits usage and topology seeds are kept while the snapshot itself
    is. Each pass gets its own copies of everything it mutates, so results never depend on
    what ran before.
    """

    template_key: tuple[object, ...] = ()
    templates: tuple[list[Template], dict[str, str]] | None = None
    base: _Base | None = None
    every_cluster: Cluster | None = None
    labels: frozenset[str] = frozenset()
    labels_key: tuple[object, ...] = ()
    labels_holder: object = None
    every_state: list[StateNode] = field(default_factory=list)

    def pass_templates(
        self, cluster: Cluster, options: Options, well_known: frozenset[str]
    ) -> tuple[list[Template], dict[str, str]]:
        key = (cluster.nodepools, cluster.instance_types, cluster.daemonsets, options, well_known)
        old = self.template_key
        same = (
            len(old) == len(key)
            and all(a is b for a, b in zip(key[:3], old[:3], strict=True))
            and key[3:] == old[3:]
        )
        if self.templates is None or not same:
            self.templates = _templates(cluster, options, well_known)
            self.template_key = key
        return self.templates

    def snapshot(self, cluster: Cluster) -> _Base:
        if self.base is None or self.base.cluster is not cluster:
            every = self.every_state if self.every_cluster is cluster else None
            # Prototypes of untouched nodes carry over while what they depend on beyond
            # their own objects (DaemonSets, volumes, CSI limits) is the very same.
            old = self.base
            memo = None
            if old is not None and all(
                getattr(old.cluster, f) is getattr(cluster, f) for f in _EXISTING_INPUTS
            ):
                memo = {e.state.name: e for e in old.existing}
            self.base = _base(cluster, every, memo)
        return self.base

    def well_known(self, cluster: Cluster, options: Options) -> frozenset[str]:
        """``well_known_labels``, kept while the instance types and options are the same."""
        key = (id(cluster.instance_types), options.extra_well_known_labels)
        if self.labels_key != key or self.labels_holder is not cluster.instance_types:
            self.labels = well_known_labels(cluster, options)
            self.labels_key, self.labels_holder = key, cluster.instance_types
        return self.labels

    def states(self, cluster: Cluster) -> list[StateNode]:
        """Every state node of ``cluster`` (shared with callers that survey the snapshot)."""
        if self.every_cluster is not cluster:
            self.every_state = all_states(cluster)
            self.every_cluster = cluster
        return self.every_state

    def derived(self, cluster: Cluster, key: str, make: Callable[[], T]) -> T:
        """``make()`` computed once per snapshot (callers' own per-snapshot values)."""
        derived = self.snapshot(cluster).derived
        if key not in derived:
            derived[key] = make()
        return cast("T", derived[key])


def all_states(cluster: Cluster) -> list[StateNode]:
    """Every state node of the snapshot (deleting ones included)."""
    by_type: dict[str, InstanceType] = {}
    for types in cluster.instance_types.values():
        for it in types:
            by_type.setdefault(it.name, it)
    return state_nodes(cluster, by_type)


def _live_states(cluster: Cluster, every: list[StateNode] | None = None) -> list[StateNode]:
    every = all_states(cluster) if every is None else every
    states = [s for s in every if not s.deleting]
    states.sort(key=lambda s: (not s.initialized, s.name))
    return states


def copy_existing(e: Existing) -> Existing:
    """A copy of an existing node a pass may mutate (placing pods on it)."""
    return Existing(
        e.state,
        e.requirements,
        e.taints,
        dict(e.remaining),
        list(e.host_ports),
        {k: set(v) for k, v in e.volumes.items()},
        e.volume_limits,
        list(e.pods),
        e._taint_cache,
    )


def build_context(
    cluster: Cluster,
    pending: Sequence[Pod],
    options: Options,
    excluded: frozenset[str],
    reuse: Reuse | None = None,
) -> PassContext:
    """Build a pass over ``cluster`` for ``pending`` pods, leaving ``excluded`` nodes out."""
    well_known = (
        well_known_labels(cluster, options) if reuse is None else reuse.well_known(cluster, options)
    )
    if reuse is None:
        templates, skipped = _templates(cluster, options, well_known)
        base = _base(cluster)
    else:
        templates, skipped = reuse.pass_templates(cluster, options, well_known)
        base = reuse.snapshot(cluster)
    out = frozenset(base.index[name] for name in excluded if name in base.index)
    # Nodes gone from the snapshot already have no room in the free index; the rest of the
    # set-up leaves them out like the pass's own exclusions.
    gone = out | base.dead if base.dead else out
    topology = Topology({}, cluster.namespace_labels)
    ctx = PassContext(
        options,
        templates,
        list(base.existing),
        topology,
        base.volumes,
        _limits(base, templates, out),
        well_known,
        any(t.effect == PREFER_NO_SCHEDULE for t in _all_taints(templates)),
        dict(skipped),
        gone,
        base.free.without(out),
        base.index,
    )
    ignore = options.preference_policy == "Ignore"
    for pod in pending:
        # Creates the pod's topology groups before any is seeded; a pod without spreads or
        # (anti-)affinity creates none (its selection is only cached, as placement caches it).
        if _has_topology(pod):
            ctx.pod_groups(PodWork.of(pod, ignore))
    for index, pod in base.anti_owners:
        if index not in gone:
            for term in pod.required_anti_affinity:
                topology.inverse_group(pod, term)
    _universe(topology, templates, ctx.existing, gone)
    _seed_topology(base, topology, gone)
    return ctx


def extend(ctx: PassContext, cluster: Cluster, states: Sequence[StateNode]) -> None:
    """Join ``states`` (nodes not in ``cluster``: a command's replacements, empty) to a
    pass's set-up, at the end of the pass order: O(joined), where a snapshot with them
    costs a set-up of O(nodes + pods). Their zones are the templates' (already in the
    topology's universe); their hostnames are new domains with no pods."""
    for node in _existing(cluster, states, ctx.volumes):
        ctx.free.insert(len(ctx.existing), node.remaining)
        ctx.existing.append(node)


def _has_topology(pod: Pod) -> bool:
    """Whether ``pod`` has spreads or pod (anti-)affinity terms (``pod_groups`` makes groups
    only from those)."""
    return bool(
        pod.topology_spread
        or pod.required_affinity
        or pod.preferred_affinity
        or pod.required_anti_affinity
        or pod.preferred_anti_affinity
    )


def _seed_topology(base: _Base, topology: Topology, out: frozenset[int]) -> None:
    """Start every group's counts from the pods already bound (excluded nodes left out)."""
    for inverse, groups in ((False, topology.groups), (True, topology.inverse)):
        for identity, group in groups.items():
            memo_key = (inverse, identity)
            seed = base.seeds.get(memo_key)
            if seed is None:
                seed = base.seeds[memo_key] = _seed(base, topology, identity, group, inverse)
            counts, per_node = seed
            group.counts = dict(counts)
            for index in out:
                for domain in per_node.get(index, ()):
                    group.counts[domain] -= 1
            group.total = sum(group.counts.values())


def _all_taints(templates: Sequence[Template]) -> list[Taint]:
    return [t for tmpl in templates for t in tmpl.taints]


def _limits(base: _Base, templates: Sequence[Template], out: frozenset[int]) -> Limits:
    limits = {t.nodepool.name: t.nodepool.limits for t in templates if t.nodepool.limits}
    if not limits:
        return Limits(limits, {}, {})
    used = {pool: dict(base.pool_used.get(pool, {})) for pool in limits}
    nodes = {pool: base.pool_nodes.get(pool, 0) for pool in limits}
    for index in out:
        state = base.states[index]
        if state.nodepool in limits:
            used[state.nodepool] = res.subtract(used[state.nodepool], state.capacity)
            nodes[state.nodepool] -= 1
    return Limits(limits, used, nodes)
