"""Setting up a provisioning pass: templates, existing capacity, topology, volumes and limits.

Everything here is computed once per pass from the snapshot, so the scheduling loop only does
incremental work. NodePools are ordered by weight (highest first), ties by name descending, as
upstream does; pools that are not ready, are being deleted, are static, or whose types all fail
the template's requirements are left out of the pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, DaemonSet, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.catalog import CapacityIndex, Catalog
from karpenter.core.provisioning.daemons import daemon_alternatives, groups_for_template
from karpenter.core.provisioning.existing import StateNode, state_nodes
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.targets import Claim, Existing, Template
from karpenter.core.provisioning.topology import AFFINITY, ANTI_AFFINITY, PodGroups, Topology
from karpenter.core.provisioning.volumes import VolumeError, VolumeIndex
from karpenter.core.scheduling.requirements import Requirement, Requirements, from_selector_terms
from karpenter.core.scheduling.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, untolerated

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
    """Remaining NodePool limits, counting new claims at the largest type they may become."""

    limits: Mapping[str, res.Resources]
    used: dict[str, dict[str, int]]
    nodes_used: dict[str, int]
    _caps: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)

    def mask(self, template: Template, claims: Sequence[Claim]) -> int:
        """Types a new claim of this pool may still use (-1: all, 0: none)."""
        pool = template.nodepool.name
        limits = self.limits.get(pool)
        if not limits:
            return -1
        used = dict(self.used.get(pool, {}))
        nodes = self.nodes_used.get(pool, 0)
        names = [n for n in limits if n != res.NODES]
        for claim in claims:
            if claim.template is template:
                nodes += 1
                for name, value in self._claim_capacity(template, claim.mask, names).items():
                    used[name] = used.get(name, 0) + value
        if res.NODES in limits and nodes + 1 > limits[res.NODES] // 1000:
            return 0
        remaining = {n: limits[n] - used.get(n, 0) for n in names}
        return template.capacity.within(remaining)

    def _claim_capacity(self, template: Template, mask: int, names: list[str]) -> dict[str, int]:
        key = (template.index, mask)
        caps = self._caps.get(key)
        if caps is None:
            caps = template.capacity.max_capacity(template.catalog.indices(mask), names)
            self._caps[key] = caps
        return caps

    def exceeded(self, template: Template, claims: Sequence[Claim], fit: int) -> list[str]:
        """Limited resources that no fitting type stays within (for reasons)."""
        pool = template.nodepool.name
        limits = self.limits.get(pool) or {}
        out = []
        for name, limit in sorted(limits.items()):
            if name == res.NODES:
                count = self.nodes_used.get(pool, 0) + sum(c.template is template for c in claims)
                if count + 1 > limit // 1000:
                    out.append(f"{name}={limit // 1000}")
                continue
            if not fit & template.capacity.within(
                {name: limit - self._used(template, claims, name)}
            ):
                out.append(f"{name}={res.describe({name: limit}).split('=')[1]}")
        return out

    def _used(self, template: Template, claims: Sequence[Claim], name: str) -> int:
        total = self.used.get(template.nodepool.name, {}).get(name, 0)
        for claim in claims:
            if claim.template is template:
                total += self._claim_capacity(template, claim.mask, [name])[name]
        return total


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

    def pod_groups(self, work: PodWork) -> PodGroups:
        """The topology groups a pod must satisfy in its current relaxation state."""
        pod = work.pod
        topo = self.topology
        owned = []
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
    cluster: Cluster, states: Sequence[StateNode], volumes: VolumeIndex
) -> list[Existing]:
    limits = {c.name: dict(c.limits) for c in cluster.csinodes}
    out = []
    for state in states:
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
    topology: Topology, templates: Sequence[Template], existing: Sequence[Existing]
) -> None:
    """Every domain of every topology key in play, with the taints reachable there."""
    keys = {g.key for g in [*topology.groups.values(), *topology.inverse.values()]}
    keys.discard(lbl.HOSTNAME)
    universe: dict[str, dict[str, list[tuple[Taint, ...]]]] = {k: {} for k in keys}
    for t in templates:
        _template_domains(t, keys, universe)
    for node in existing:
        for key in keys:
            value = node.state.labels.get(key)
            if value is not None:
                universe[key].setdefault(value, []).append(node.taints)
    topology.universe = universe


@dataclass(slots=True)
class Reuse:
    """A memo for many passes over related snapshots (disruption's what-if simulations).

    Templates (catalog indexes, daemon groups) are kept while the NodePools, instance types,
    DaemonSets and options are the very same objects; the merged state nodes and their
    starting capacity are kept while the snapshot itself is. Each pass gets its own copies of
    everything it mutates, so results never depend on what ran before.
    """

    template_key: tuple[object, ...] = ()
    templates: tuple[list[Template], dict[str, str]] | None = None
    cluster: Cluster | None = None
    states: list[StateNode] = field(default_factory=list)
    existing: dict[str, Existing] = field(default_factory=dict)
    volumes: VolumeIndex | None = None

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

    def snapshot(
        self, cluster: Cluster
    ) -> tuple[list[StateNode], dict[str, Existing], VolumeIndex]:
        if self.cluster is not cluster or self.volumes is None:
            states = _live_states(cluster)
            volumes = VolumeIndex(cluster)
            self.existing = {e.state.name: e for e in _existing(cluster, states, volumes)}
            self.states, self.volumes, self.cluster = states, volumes, cluster
        return self.states, self.existing, self.volumes


def _live_states(cluster: Cluster) -> list[StateNode]:
    by_type: dict[str, InstanceType] = {}
    for types in cluster.instance_types.values():
        for it in types:
            by_type.setdefault(it.name, it)
    states = [s for s in state_nodes(cluster, by_type) if not s.deleting]
    states.sort(key=lambda s: (not s.initialized, s.name))
    return states


def _copy(e: Existing) -> Existing:
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
    """Build a pass over ``cluster`` for ``pending`` pods."""
    well_known = well_known_labels(cluster, options)
    if reuse is None:
        templates, skipped = _templates(cluster, options, well_known)
        states = [s for s in _live_states(cluster) if s.name not in excluded]
        volumes = VolumeIndex(cluster)
        existing = _existing(cluster, states, volumes)
    else:
        templates, skipped = reuse.pass_templates(cluster, options, well_known)
        all_states, prototypes, volumes = reuse.snapshot(cluster)
        states = [s for s in all_states if s.name not in excluded]
        existing = [_copy(prototypes[s.name]) for s in states]
    topology = Topology({}, cluster.namespace_labels)
    ignore = options.preference_policy == "Ignore"
    ctx = PassContext(
        options,
        templates,
        existing,
        topology,
        volumes,
        _limits(cluster, templates, states),
        well_known,
        any(t.effect == PREFER_NO_SCHEDULE for t in _all_taints(templates)),
        dict(skipped),
    )
    for pod in pending:
        ctx.pod_groups(PodWork.of(pod, ignore))
    bound = [p for s in states for p in s.pods if p.is_active()]
    for pod in bound:
        for term in pod.required_anti_affinity:
            topology.inverse_group(pod, term)
    _universe(topology, templates, existing)
    by_name = {e.state.name: e for e in existing}
    for state in states:
        node = by_name[state.name]
        for pod in state.pods:
            if pod.is_active():
                inverse = [topology.inverse_group(pod, t) for t in pod.required_anti_affinity]
                topology.record(pod, node.requirements, state.hostname, node.taints, inverse)
    return ctx


def _all_taints(templates: Sequence[Template]) -> list[Taint]:
    return [t for tmpl in templates for t in tmpl.taints]


def _limits(cluster: Cluster, templates: Sequence[Template], states: Sequence[StateNode]) -> Limits:
    limits = {t.nodepool.name: t.nodepool.limits for t in templates if t.nodepool.limits}
    used: dict[str, dict[str, int]] = {}
    nodes: dict[str, int] = {}
    for state in states:
        pool = state.nodepool
        if pool in limits:
            used[pool] = res.add(used.get(pool, {}), state.capacity)
            nodes[pool] = nodes.get(pool, 0) + 1
    del cluster
    return Limits(limits, used, nodes)
