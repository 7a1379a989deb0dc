"""DaemonSet overhead: which daemons would run on a new node, per NodePool and instance type.

A new node pays for every DaemonSet whose pod tolerates the node's taints (PreferNoSchedule is
tolerated, as the kube-scheduler only prefers against it) and whose node affinity the node
satisfies. Which daemons apply can differ per instance type (a daemon for arm64 only, say), so a
NodePool's types are grouped by the exact set of daemons they attract; each group carries the
summed requests and host ports of its daemons.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import DaemonSet
from karpenter.core.model.pod import HostPort, Pod
from karpenter.core.provisioning.catalog import Catalog
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms
from karpenter.core.scheduling.taints import Taint, untolerated


@dataclass(frozen=True, slots=True)
class DaemonGroup:
    """Instance types (bitmask) that attract the same daemons, and what those daemons need."""

    mask: int
    overhead: res.Resources
    host_ports: tuple[HostPort, ...]


def daemon_alternatives(pod: Pod) -> list[Requirements]:
    """A daemon pod's requirement alternatives (nodeSelector ∧ each required term)."""
    base = Requirements.from_labels(pod.node_selector)
    if not pod.required_node_terms:
        return [base]
    return [base.intersect(from_selector_terms(t)) for t in pod.required_node_terms]


def groups_for_template(
    catalog: Catalog,
    template_reqs: Requirements,
    taints: tuple[Taint, ...],
    daemonsets: tuple[DaemonSet, ...],
    well_known: frozenset[str],
) -> tuple[DaemonGroup, ...]:
    """Group a NodePool's types by the daemons they attract."""
    masks = []
    for ds in daemonsets:
        pod = ds.template
        if untolerated(taints, pod.tolerations, include_prefer=False):
            masks.append(0)
            continue
        mask = 0
        for alt in daemon_alternatives(pod):
            if template_reqs.compatible(alt, well_known):
                mask |= _ignore_offers(catalog, template_reqs.intersect(alt))
        masks.append(mask)
    by_members: dict[tuple[int, ...], int] = {}
    for index in range(len(catalog.types)):
        bit = 1 << index
        members = tuple(i for i, m in enumerate(masks) if m & bit)
        by_members[members] = by_members.get(members, 0) | bit
    groups = []
    for members, mask in sorted(by_members.items()):
        pods = [daemonsets[i].template for i in members]
        overhead = res.add(*(p.requests for p in pods))
        ports = tuple(hp for p in pods for hp in p.host_ports)
        groups.append(DaemonGroup(mask, overhead, ports))
    return tuple(groups)


def _ignore_offers(catalog: Catalog, reqs: Requirements) -> int:
    # Daemon placement depends on labels, not on whether an offering is available right now.
    mask = catalog.all
    for req in reqs.values():
        mask &= catalog.key_mask(req)
    return mask
