"""A pending pod's working copy during a pass: its requirements and the preferences left to relax.

Karpenter treats preferences as requirements until a pod cannot be placed, then relaxes them one
step at a time in upstream's order: (1) drop the first of several required node-affinity terms,
(2) the heaviest preferred pod-affinity term, (3) the heaviest preferred pod anti-affinity term,
(4) the heaviest preferred node-affinity term, (5) one ScheduleAnyway spread constraint, and
(6) tolerate PreferNoSchedule taints when some NodePool has one. ``signature`` identifies pods
that are alike for every placement question, so the solver can share work between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from karpenter.core.model.pod import (
    SCHEDULE_ANYWAY,
    Pod,
    SelectorTerm,
    TopologySpread,
    WeightedAffinityTerm,
    WeightedNodeTerm,
)
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms
from karpenter.core.scheduling.taints import PREFER_NO_SCHEDULE_TOLERATION, Toleration


@dataclass(slots=True)
class PodWork:
    """Mutable relaxation state of one pending pod (owned by the solver for one pass)."""

    pod: Pod
    required_terms: list[SelectorTerm]
    preferred_terms: list[WeightedNodeTerm]
    preferred_affinity: list[WeightedAffinityTerm]
    preferred_anti: list[WeightedAffinityTerm]
    spreads: list[TopologySpread]
    tolerations: tuple[Toleration, ...]
    relaxations: list[str] = field(default_factory=list)
    _requirements: Requirements | None = None
    _strict: Requirements | None = None
    _signature: tuple[object, ...] | None = None

    @staticmethod
    def of(pod: Pod, ignore_preferences: bool) -> PodWork:
        """A working copy; with ``ignore_preferences`` no preference is ever modelled."""
        by_weight = lambda w: -w.weight  # noqa: E731 - stable sort key, heaviest first
        spreads = list(pod.topology_spread)
        if ignore_preferences:
            spreads = [s for s in spreads if s.when_unsatisfiable != SCHEDULE_ANYWAY]
        return PodWork(
            pod=pod,
            required_terms=list(pod.required_node_terms),
            preferred_terms=[]
            if ignore_preferences or not pod.preferred_node_terms
            else sorted(pod.preferred_node_terms, key=by_weight),
            preferred_affinity=[]
            if ignore_preferences or not pod.preferred_affinity
            else sorted(pod.preferred_affinity, key=by_weight),
            preferred_anti=[]
            if ignore_preferences or not pod.preferred_anti_affinity
            else sorted(pod.preferred_anti_affinity, key=by_weight),
            spreads=spreads,
            tolerations=pod.tolerations,
        )

    def _invalidate(self) -> None:
        self._requirements = None
        self._strict = None
        self._signature = None

    @property
    def strict_requirements(self) -> Requirements:
        """nodeSelector + the first required node-affinity term (no preferences)."""
        if self._strict is None:
            reqs = Requirements.from_labels(self.pod.node_selector)
            if self.required_terms:
                reqs = reqs.intersect(from_selector_terms(self.required_terms[0]))
            self._strict = reqs
        return self._strict

    @property
    def requirements(self) -> Requirements:
        """Strict requirements + the heaviest preferred node-affinity term, as upstream."""
        if self._requirements is None:
            reqs = self.strict_requirements
            if self.preferred_terms:
                reqs = reqs.intersect(from_selector_terms(self.preferred_terms[0].term))
            self._requirements = reqs
        return self._requirements

    def node_filter(self) -> tuple[Requirements, ...]:
        """Alternatives a node must match for this pod's spread counting (affinity Honor)."""
        base = Requirements.from_labels(self.pod.node_selector)
        if not self.pod.required_node_terms:
            return (base,)
        return tuple(base.intersect(from_selector_terms(t)) for t in self.pod.required_node_terms)

    def relax(self, prefer_no_schedule_pools: bool) -> bool:
        """Drop one preference in upstream's order; False when nothing is left to relax."""
        step = self._relax_step(prefer_no_schedule_pools)
        if step is None:
            return False
        self.relaxations.append(step)
        self._invalidate()
        return True

    def _relax_step(self, prefer_no_schedule_pools: bool) -> str | None:
        if len(self.required_terms) > 1:
            self.required_terms.pop(0)
            return "required node affinity term"
        if self.preferred_affinity:
            self.preferred_affinity.pop(0)
            return "preferred pod affinity"
        if self.preferred_anti:
            self.preferred_anti.pop(0)
            return "preferred pod anti-affinity"
        if self.preferred_terms:
            self.preferred_terms.pop(0)
            return "preferred node affinity"
        for index, spread in enumerate(self.spreads):
            if spread.when_unsatisfiable == SCHEDULE_ANYWAY:
                self.spreads.pop(index)
                return "ScheduleAnyway topology spread"
        if prefer_no_schedule_pools and PREFER_NO_SCHEDULE_TOLERATION not in self.tolerations:
            self.tolerations = (*self.tolerations, PREFER_NO_SCHEDULE_TOLERATION)
            return "PreferNoSchedule taints"
        return None

    @property
    def signature(self) -> tuple[object, ...]:
        """Everything placement depends on; equal signatures get equal answers."""
        if self._signature is None:
            pod = self.pod
            self._signature = (
                pod.namespace,
                tuple(sorted(pod.labels.items())),
                tuple(sorted(pod.requests.items())),
                self.requirements,
                tuple(self.required_terms[1:]),
                tuple(self.preferred_affinity),
                tuple(self.preferred_anti),
                pod.required_affinity,
                pod.required_anti_affinity,
                tuple(self.spreads),
                self.tolerations,
                pod.host_ports,
                pod.pvc_names,
            )
        return self._signature


def unconstrained(pod: Pod) -> bool:
    """The pod's placement depends on no other pod and no volume (no topology spread, pod
    (anti-)affinity or claims): what a what-if decided for it holds however others move."""
    return not (
        pod.topology_spread
        or pod.required_affinity
        or pod.preferred_affinity
        or pod.required_anti_affinity
        or pod.preferred_anti_affinity
        or pod.pvc_names
    )


def standalone(pod: Pod) -> bool:
    """No spread, pod (anti-)affinity, host port or volume of the pod's own ties its placement
    to other pods or to a target's history."""
    return unconstrained(pod) and not pod.host_ports


def alike(work: PodWork, leader: PodWork) -> bool:
    """Whether ``work`` asks every target what ``leader`` (unrelaxed and ``standalone``) asks:
    it is unrelaxed and ``places_alike``. Labels and namespace aside: a standalone pod's are
    asked nothing but whether other pods' rules select it, which is the caller's to check."""
    return not work.relaxations and places_alike(work.pod, leader.pod)


def places_alike(a: Pod, b: Pod) -> bool:
    """Whether ``a`` is standalone and asks a node what ``b`` asks: the same requests, node
    selection and tolerations."""
    return (
        a.requests == b.requests
        and a.node_selector == b.node_selector
        and a.required_node_terms == b.required_node_terms
        and a.preferred_node_terms == b.preferred_node_terms
        and a.tolerations == b.tolerations
        and standalone(a)
    )
