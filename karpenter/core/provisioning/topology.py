"""Topology: spread constraints, pod affinity and anti-affinity, counted per domain.

A ``Group`` counts, per domain of one topology key, the pods its selector matches. Pods that
declare the same constraint share one group (deduplicated on the constraint's identity), so a
Deployment of 1000 replicas costs one group, not 1000. Groups are built from every pending pod
before the pass starts and seeded with the pods already bound, then counts grow incrementally as
the pass places pods. Inverse groups count the *owners* of required anti-affinity terms, so that
other pods stay out of their domains, as the kube-scheduler enforces symmetrically.

``constrain`` answers, for one pod and one target (an existing node or a NodeClaim being
built), which domains the pod may use, narrowing a NodeClaim's requirements to them. It reports
whether a rejection is *permanent* for that target: counts only grow and a claim's requirements
only narrow, so anti-affinity and hostname-spread rejections never heal, while a zonal spread or
an affinity rejection may.

Spread and affinity narrow a claim to one domain. Anti-affinity narrows it to *every* empty
domain the pod and the target allow, as upstream does: the claim commits to a domain only when
it launches, so until then the pod counts in each of them for anti-affinity, and later
anti-affine pods of the same pass cannot use any (upstream's accepted cost of late commitment:
zonal self-anti-affinity places one pod per pass until the claims have launched).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model.pod import HONOR, Pod, PodAffinityTerm, TopologySpread
from karpenter.core.scheduling.requirements import Requirement, Requirements
from karpenter.core.scheduling.selectors import LabelSelector
from karpenter.core.scheduling.taints import Taint, Toleration, untolerated

SPREAD = "spread"
AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"


@dataclass(eq=False, slots=True)
class Group:
    """Counts of matching pods per domain for one constraint identity."""

    kind: str
    key: str
    selector: LabelSelector | None
    namespaces: frozenset[str] | None  # None: every namespace
    max_skew: int = 1
    min_domains: int | None = None
    node_filter: tuple[Requirements, ...] | None = None
    tolerations: tuple[Toleration, ...] | None = None  # set when nodeTaintsPolicy is Honor
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def selects(self, pod: Pod) -> bool:
        """True when ``pod`` is counted by this group."""
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)

    def counts_on(self, reqs: Requirements, taints: Sequence[Taint]) -> bool:
        """Whether pods on a target with these requirements count (spread node filters)."""
        if self.tolerations is not None and untolerated(taints, self.tolerations):
            return False
        if self.node_filter is None:
            return True
        return any(not reqs.conflicts(alt) for alt in self.node_filter)

    def add(self, domain: str, amount: int = 1) -> None:
        """Count ``amount`` more matching pods in ``domain``."""
        self.counts[domain] = self.counts.get(domain, 0) + amount
        self.total += amount


@dataclass(frozen=True, slots=True)
class Reject:
    """Why a pod cannot go on a target; ``permanent`` rejections never heal in this pass."""

    kind: str
    detail: str
    permanent: bool


@dataclass(slots=True)
class PodGroups:
    """The groups a pod must satisfy: those it owns and the inverse groups that select it."""

    owned: list[tuple[Group, bool]]  # (group, the pod selects itself)
    inverse_blocking: list[Group]
    inverse_owned: list[Group]


class Topology:
    """All topology groups of a pass, their domain universe and counts."""

    def __init__(
        self,
        universe: Mapping[str, Mapping[str, list[tuple[Taint, ...]]]],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.universe = universe
        self.namespace_labels = namespace_labels
        self.groups: dict[tuple[object, ...], Group] = {}
        self.inverse: dict[tuple[object, ...], Group] = {}
        self._selects_cache: dict[tuple[object, ...], tuple[list[Group], list[Group]]] = {}

    # ---- building ---------------------------------------------------------------------------
    def _namespaces(self, pod: Pod, term: PodAffinityTerm) -> frozenset[str] | None:
        if term.namespace_selector is not None:
            if not term.namespace_selector.match_labels and not (
                term.namespace_selector.match_expressions
            ):
                return None
            selected = {
                ns
                for ns, labels in self.namespace_labels.items()
                if term.namespace_selector.matches(labels)
            }
            return frozenset(selected | set(term.namespaces))
        return frozenset(term.namespaces or (pod.namespace,))

    def term_group(self, pod: Pod, term: PodAffinityTerm, kind: str) -> Group:
        """The (shared) group of a pod (anti-)affinity term."""
        selector = term.selector
        if selector is not None and term.match_label_keys:
            extra = {k: pod.labels[k] for k in term.match_label_keys if k in pod.labels}
            selector = selector.with_labels(extra)
        namespaces = self._namespaces(pod, term)
        identity = (kind, lbl.normalize_key(term.topology_key), selector, namespaces)
        group = self.groups.get(identity)
        if group is None:
            group = Group(kind, identity[1], selector, namespaces)
            self.groups[identity] = group
            self._selects_cache.clear()
        return group

    def inverse_identity(self, pod: Pod, term: PodAffinityTerm) -> tuple[object, ...]:
        """The identity of a required anti-affinity term's inverse group."""
        return (lbl.normalize_key(term.topology_key), term.selector, self._namespaces(pod, term))

    def inverse_group(self, pod: Pod, term: PodAffinityTerm) -> Group:
        """The inverse group of a required anti-affinity term: where its owners are."""
        namespaces = self._namespaces(pod, term)
        key = lbl.normalize_key(term.topology_key)
        identity = (key, term.selector, namespaces)
        group = self.inverse.get(identity)
        if group is None:
            group = Group(ANTI_AFFINITY, key, term.selector, namespaces)
            self.inverse[identity] = group
            self._selects_cache.clear()
        return group

    def spread_group(
        self, pod: Pod, tsc: TopologySpread, node_filter: tuple[Requirements, ...]
    ) -> Group:
        """The (shared) group of a topology spread constraint."""
        selector = tsc.selector
        if selector is not None and tsc.match_label_keys:
            extra = {k: pod.labels[k] for k in tsc.match_label_keys if k in pod.labels}
            selector = selector.with_labels(extra)
        filt = node_filter if tsc.node_affinity_policy == HONOR else None
        tols = pod.tolerations if tsc.node_taints_policy == HONOR else None
        identity = (
            SPREAD,
            lbl.normalize_key(tsc.topology_key),
            selector,
            pod.namespace,
            tsc.max_skew,
            tsc.min_domains,
            filt,
            tols,
        )
        group = self.groups.get(identity)
        if group is None:
            group = Group(
                SPREAD,
                identity[1],
                selector,
                frozenset((pod.namespace,)),
                tsc.max_skew,
                tsc.min_domains,
                filt,
                tols,
            )
            self.groups[identity] = group
            self._selects_cache.clear()
        return group

    def selecting(self, pod: Pod) -> tuple[list[Group], list[Group]]:
        """(groups counting ``pod``, inverse groups whose selector matches ``pod``)."""
        cache_key = (pod.namespace, tuple(sorted(pod.labels.items())))
        cached = self._selects_cache.get(cache_key)
        if cached is None:
            counting = [g for g in self.groups.values() if g.selects(pod)]
            blocking = [g for g in self.inverse.values() if g.selects(pod)]
            cached = (counting, blocking)
            self._selects_cache[cache_key] = cached
        return cached

    # ---- counting ---------------------------------------------------------------------------
    def record(
        self,
        pod: Pod,
        reqs: Requirements,
        hostname: str,
        taints: Sequence[Taint],
        inverse_owned: Iterable[Group] = (),
    ) -> None:
        """Count ``pod`` placed on a target with these requirements / hostname."""
        counting, _ = self.selecting(pod)
        for group in counting:
            if group.kind == SPREAD and not group.counts_on(reqs, taints):
                continue
            for domain in self.domains_for_record(group, reqs, hostname):
                group.add(domain)
        for group in inverse_owned:
            for domain in self.domains_for_record(group, reqs, hostname):
                group.add(domain)

    def domains_for_record(self, group: Group, reqs: Requirements, hostname: str) -> list[str]:
        """The domains a pod placed on this target adds to ``group``."""
        if group.key == lbl.HOSTNAME:
            return [hostname]
        req = reqs.get(group.key)
        if req is None or req.complement:
            return []
        if len(req.values) == 1 or group.kind == ANTI_AFFINITY:
            return sorted(req.values)
        return []

    # ---- checking ---------------------------------------------------------------------------
    def candidates(self, key: str, reqs: Requirements) -> list[str]:
        """Domains of ``key`` a target with ``reqs`` may still take, sorted."""
        req = reqs.get(key)
        domains = self.universe.get(key, {})
        if req is None:
            return sorted(domains)
        if not req.complement:
            return sorted(req.values)
        return sorted(d for d in domains if req.has(d))

    def constrain(
        self,
        groups: PodGroups,
        reqs: Requirements,
        hostname: str,
        feasible: Callable[[Requirements], bool] | None,
        pod_reqs: Requirements | None = None,
    ) -> Requirements | Reject:
        """Narrow ``reqs`` so every group of the pod is satisfied, or say why not.

        ``feasible`` is None for existing nodes (their domains are fixed labels); for a
        NodeClaim it tells whether narrowed requirements still leave a launchable type.
        ``pod_reqs`` are the pod's own node requirements (``reqs`` already merges the target's).
        """
        for group, self_match in groups.owned:
            outcome = self._one(group, self_match, reqs, hostname, feasible, pod_reqs=pod_reqs)
            if isinstance(outcome, Reject):
                return outcome
            reqs = outcome
        for group in groups.inverse_blocking:
            outcome = self._one(group, False, reqs, hostname, feasible, inverse=True)
            if isinstance(outcome, Reject):
                return outcome
            reqs = outcome
        return reqs

    def _one(
        self,
        group: Group,
        self_match: bool,
        reqs: Requirements,
        hostname: str,
        feasible: Callable[[Requirements], bool] | None,
        inverse: bool = False,
        pod_reqs: Requirements | None = None,
    ) -> Requirements | Reject:
        if group.key == lbl.HOSTNAME:
            return self._hostname(group, self_match, reqs, hostname, inverse, pod_reqs)
        if feasible is None and reqs.get(group.key) is None:
            # An existing node without the key is in no domain: nothing to avoid there, and
            # nothing to spread over or join (the kube-scheduler filters such nodes out).
            if group.kind == ANTI_AFFINITY:
                return reqs
            return Reject("topology", _describe(group, "node has no such label"), True)
        options = self.candidates(group.key, reqs)
        if group.kind == SPREAD:
            return self._spread(group, self_match, reqs, options, feasible)
        if group.kind == AFFINITY:
            populated = [d for d in options if group.counts.get(d, 0) > 0]
            if not populated and self_match and _may_open(group, pod_reqs):
                populated = options
            return self._narrow(group, reqs, populated, feasible, permanent=False)
        empty = [d for d in options if group.counts.get(d, 0) == 0]
        return self._narrow_all(group, reqs, empty, feasible)

    def _hostname(
        self,
        group: Group,
        self_match: bool,
        reqs: Requirements,
        hostname: str,
        inverse: bool,
        pod_reqs: Requirements | None,
    ) -> Requirements | Reject:
        count = group.counts.get(hostname, 0)
        if group.kind == SPREAD:
            if count + int(self_match) > group.max_skew:
                return Reject("topology", _describe(group, "max skew exceeded"), True)
            return reqs
        if group.kind == AFFINITY:
            if count > 0 or (self_match and _may_open(group, pod_reqs)):
                return reqs
            return Reject("topology", _describe(group, "no matching pod there"), False)
        if count > 0:
            what = "an anti-affinity owner is there" if inverse else "a matching pod is there"
            return Reject("topology", _describe(group, what), True)
        return reqs

    def _spread(
        self,
        group: Group,
        self_match: bool,
        reqs: Requirements,
        options: list[str],
        feasible: Callable[[Requirements], bool] | None,
    ) -> Requirements | Reject:
        eligible = self._eligible(group)
        minimum = min((group.counts.get(d, 0) for d in eligible), default=0)
        if group.min_domains is not None and len(eligible) < group.min_domains:
            minimum = 0
        valid = [
            d
            for d in options
            if group.counts.get(d, 0) + int(self_match) - minimum <= group.max_skew
        ]
        valid.sort(key=lambda d: (group.counts.get(d, 0), d))
        return self._narrow(group, reqs, valid, feasible, permanent=False, keep_order=True)

    def eligible(self, group: Group) -> list[str]:
        """Domains a spread group's skew is measured over (node filter and taints honoured)."""
        return self._eligible(group)

    def _eligible(self, group: Group) -> list[str]:
        domains = self.universe.get(group.key, {})
        out = []
        for domain, taint_sets in domains.items():
            if group.node_filter is not None and not any(
                alt.get_or_exists(group.key).has(domain) for alt in group.node_filter
            ):
                continue
            if group.tolerations is not None and not any(
                not untolerated(ts, group.tolerations) for ts in taint_sets
            ):
                continue
            out.append(domain)
        return out

    def _narrow(
        self,
        group: Group,
        reqs: Requirements,
        options: list[str],
        feasible: Callable[[Requirements], bool] | None,
        *,
        permanent: bool,
        keep_order: bool = False,
    ) -> Requirements | Reject:
        ordered = options if keep_order else sorted(options)
        current = reqs.get(group.key)
        for domain in ordered:
            if current is not None and not current.has(domain):
                continue
            if feasible is None:
                return reqs
            narrowed = reqs.intersect(
                Requirements((Requirement(group.key, False, frozenset((domain,))),))
            )
            if feasible(narrowed):
                return narrowed
        return Reject("topology", _describe(group, "no domain satisfies it"), permanent)

    def _narrow_all(
        self,
        group: Group,
        reqs: Requirements,
        empty: list[str],
        feasible: Callable[[Requirements], bool] | None,
    ) -> Requirements | Reject:
        """Anti-affinity: keep every empty domain the target allows (no early commitment)."""
        current = reqs.get(group.key)
        allowed = [d for d in empty if current is None or current.has(d)]
        if allowed and feasible is None:
            return reqs
        if allowed:
            narrowed = reqs.intersect(
                Requirements((Requirement(group.key, False, frozenset(allowed)),))
            )
            if feasible is not None and feasible(narrowed):
                return narrowed
        return Reject("topology", _describe(group, "no domain satisfies it"), True)


def _may_open(group: Group, pod_reqs: Requirements | None) -> bool:
    """Whether a self-affine pod may open a new domain of ``group`` (upstream's bootstrap).

    Yes when no matching pod exists anywhere, or when every domain holding one is ruled out
    by the pod's own requirements on the key: such a pod could never join them.
    """
    if group.total == 0:
        return True
    if pod_reqs is None:
        return False
    req = pod_reqs.get(group.key)
    if req is None:
        return False
    return not any(n > 0 and req.has(d) for d, n in group.counts.items())


def _describe(group: Group, why: str) -> str:
    return f"{group.kind} on {group.key}: {why}"
