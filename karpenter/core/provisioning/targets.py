"""Placement targets of a pass: NodePool templates, NodeClaims being built, existing nodes.

Each target answers "can this pod go here, and what would the target become?" without mutating
anything; the scheduler commits the answer. Rejections say whether they are permanent for that
target (resources, taints, requirements, ports and anti-affinity never improve within a pass), so
the scheduler can skip a target for every later pod that is alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from karpenter.core.model import resources as res
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import HostPort, Pod
from karpenter.core.provisioning.catalog import CapacityIndex, Catalog
from karpenter.core.provisioning.daemons import DaemonGroup
from karpenter.core.provisioning.existing import StateNode
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.reservations import Reservations, compatible_ids
from karpenter.core.provisioning.topology import PodGroups, Reject, Topology
from karpenter.core.provisioning.volumes import PodVolumes
from karpenter.core.scheduling import hostports
from karpenter.core.scheduling.requirements import Requirements
from karpenter.core.scheduling.taints import Taint, Toleration, untolerated

TAINTS = Reject("taints", "", True)
PORTS = Reject("host-ports", "", True)
REQUIREMENTS = Reject("requirements", "", True)
RESOURCES = Reject("resources", "", True)
VOLUMES = Reject("volumes", "", True)
LIMITS = Reject("limits", "", False)
MIN_VALUES = Reject("min-values", "", True)


def _tolerated(
    cache: dict[tuple[Toleration, ...], bool],
    taints: tuple[Taint, ...],
    tolerations: tuple[Toleration, ...],
) -> bool:
    # Pods of one Deployment share a tolerations tuple, so one check serves them all.
    ok = cache.get(tolerations)
    if ok is None:
        ok = cache[tolerations] = not untolerated(taints, tolerations)
    return ok


@dataclass(slots=True)
class Template:
    """A NodePool ready for the pass: catalog, merged requirements, daemons, limits."""

    index: int
    nodepool: NodePool
    catalog: Catalog
    capacity: CapacityIndex
    requirements: Requirements
    taints: tuple[Taint, ...]
    daemon_groups: tuple[DaemonGroup, ...]
    base_mask: int
    well_known: frozenset[str]
    strict_min_values: bool
    _taint_cache: dict[tuple[Toleration, ...], bool] = field(default_factory=dict)

    def tolerated(self, tolerations: tuple[Toleration, ...]) -> bool:
        """Whether pods with these tolerations tolerate the taints here (memoized)."""
        return _tolerated(self._taint_cache, self.taints, tolerations)

    def fit_mask(self, requests: res.Resources, ports: tuple[HostPort, ...]) -> int:
        """Types that fit ``requests`` plus the daemons they would run (port clashes excluded)."""
        mask = 0
        for group in self.daemon_groups:
            if ports and hostports.any_conflict(ports, group.host_ports):
                continue
            total = res.add(requests, group.overhead) if group.overhead else requests
            mask |= group.mask & self.catalog.fits(total)
        return mask

    def min_values_ok(self, reqs: Requirements, mask: int) -> bool:
        """Whether ``mask`` still offers enough distinct values for every minValues key."""
        for req in reqs.values():
            if req.min_values and self.catalog.distinct_values(mask, req.key) < req.min_values:
                return False
        return True


@dataclass(slots=True)
class Claim:
    """A NodeClaim being built in this pass."""

    template: Template
    hostname: str
    requirements: Requirements
    mask: int
    requests: dict[str, int] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    host_ports: list[HostPort] = field(default_factory=list)
    min_values_relaxed: bool = False
    reserved: frozenset[str] = frozenset()  # capacity reservation ids the claim holds


@dataclass(frozen=True, slots=True)
class ClaimFit:
    """What a claim becomes when a pod is added."""

    requirements: Requirements
    requests: dict[str, int]
    mask: int
    min_values_relaxed: bool
    reserved: frozenset[str] = frozenset()


def try_claim(
    claim: Claim,
    work: PodWork,
    groups: PodGroups,
    volumes: PodVolumes,
    topology: Topology,
    extra_mask: int = -1,
    reserved: Reservations | None = None,
) -> ClaimFit | Reject:
    """Can ``work`` join ``claim``? (``extra_mask`` restricts types, e.g. to NodePool limits;
    ``reserved`` is the pass's reservation ledger, consulted only by pools with reservations)."""
    t = claim.template
    pod = work.pod
    if not t.tolerated(work.tolerations):
        return TAINTS
    if pod.host_ports and hostports.any_conflict(pod.host_ports, claim.host_ports):
        return PORTS
    if not claim.requirements.compatible(work.requirements, t.well_known):
        return REQUIREMENTS
    total = res.add(claim.requests, pod.requests)
    fit = claim.mask & t.fit_mask(total, (*claim.host_ports, *pod.host_ports))
    if not fit:
        return RESOURCES
    fit &= extra_mask
    if not fit:
        return LIMITS
    return _place_on_claim(claim, work, groups, volumes, topology, total, fit, reserved)


def _place_on_claim(
    claim: Claim,
    work: PodWork,
    groups: PodGroups,
    volumes: PodVolumes,
    topology: Topology,
    total: dict[str, int],
    fit: int,
    reserved: Reservations | None,
) -> ClaimFit | Reject:
    """Try each volume alternative, then topology, minValues, reservations (first success)."""
    t = claim.template
    catalog = t.catalog
    merged = claim.requirements.intersect(work.requirements)

    def feasible(reqs: Requirements) -> bool:
        return bool(fit & catalog.compatible(reqs))

    last: Reject = REQUIREMENTS
    for alt in volumes.alternatives:
        if merged.conflicts(alt):
            last = VOLUMES
            continue
        candidate = merged.intersect(alt)
        if not feasible(candidate):
            continue
        outcome = topology.constrain(groups, candidate, claim.hostname, feasible, work.requirements)
        if isinstance(outcome, Reject):
            last = outcome
            continue
        mask = fit & catalog.compatible(outcome)
        relaxed = claim.min_values_relaxed
        if not t.min_values_ok(outcome, mask):
            if t.strict_min_values:
                last = MIN_VALUES
                continue
            relaxed = True
        held = _reservations(claim, reserved, mask, outcome)
        if isinstance(held, Reject):
            last = held
            continue
        return ClaimFit(outcome, total, mask, relaxed, held)
    return last


def _reservations(
    claim: Claim, reserved: Reservations | None, mask: int, reqs: Requirements
) -> frozenset[str] | Reject:
    """The reservations the claim would hold with the pod added (none without a ledger)."""
    offers = claim.template.catalog.reserved
    if reserved is None or not offers:
        return frozenset()
    ids = compatible_ids(offers, mask, reqs, reserved.id_label)
    return reserved.choose(claim.hostname, ids, claim.reserved)


@dataclass(slots=True)
class Existing:
    """An existing node (or in-flight NodeClaim) with what is left on it in this pass."""

    state: StateNode
    requirements: Requirements
    taints: tuple[Taint, ...]
    remaining: dict[str, int]
    host_ports: list[HostPort]
    volumes: dict[str, set[str]]
    volume_limits: dict[str, int]
    pods: list[Pod] = field(default_factory=list)
    _taint_cache: dict[tuple[Toleration, ...], bool] = field(default_factory=dict)

    def tolerated(self, tolerations: tuple[Toleration, ...]) -> bool:
        """Whether pods with these tolerations tolerate the taints here (memoized)."""
        return _tolerated(self._taint_cache, self.taints, tolerations)

    def volumes_fit(self, volumes: PodVolumes) -> bool:
        """CSI attach limits hold with the pod's volumes added."""
        for driver, wanted in volumes.by_driver.items():
            limit = self.volume_limits.get(driver)
            if limit is not None and len(self.volumes.get(driver, set()) | wanted) > limit:
                return False
        return True


def try_existing(
    node: Existing,
    work: PodWork,
    groups: PodGroups,
    volumes: PodVolumes,
    topology: Topology,
) -> Requirements | Reject:
    """Can ``work`` go on an existing node? (Node labels are fixed: strict compatibility.)"""
    pod = work.pod
    if not node.tolerated(work.tolerations):
        return TAINTS
    if pod.host_ports and hostports.any_conflict(pod.host_ports, node.host_ports):
        return PORTS
    if not res.fits(pod.requests, node.remaining):
        return RESOURCES
    if not node.volumes_fit(volumes):
        return VOLUMES
    if not node.requirements.compatible(work.requirements, frozenset()):
        return REQUIREMENTS
    if not any(node.requirements.compatible(alt, frozenset()) for alt in volumes.alternatives):
        return VOLUMES
    return topology.constrain(
        groups, node.requirements, node.state.hostname, None, work.requirements
    )


Check = Callable[[int], "ClaimFit | Requirements | Reject"]
