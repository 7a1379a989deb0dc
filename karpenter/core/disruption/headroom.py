"""CapacityBuffer headroom in disruption: which buffer pods the cluster hosts now, and where.

Headroom the provisioner launched for a buffer looks empty (its virtual pods are never bound),
so without care emptiness deletes it and the next provisioning pass buys it again, forever.
Upstream keeps it two ways: emptiness skips a node the provisioner's last pass put virtual pods
on, and every consolidation what-if schedules the virtual pods with the pending pods, so room
they use can only be taken away by a replacement that holds them too.

Here both come from the snapshot itself, so the controller and ``simulate`` agree: one
baseline pass with nothing removed places the pending pods, the pods of in-flight nodes and the
virtual pods, as a provisioning pass would. A virtual pod it puts on existing capacity is
*hosted*, and its node *hosts* headroom: such a node is not empty (``Candidate.buffer_pods``),
and hosted virtual pods need a home in every what-if (``simulation.reschedule``): NodeClaims
holding them are part of the command, and consolidation is refused when one would be left
without room. Virtual pods the baseline cannot put on existing capacity are the provisioner's
business (it is launching their room) and stay out of the what-ifs; upstream adds those too,
which makes every what-if launch their missing room as a "replacement". Drift and expiration
replace nodes regardless (the buffer refills), as upstream allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.buffers import is_virtual
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import Reuse
from karpenter.core.provisioning.reservations import FALLBACK
from karpenter.core.provisioning.scheduler import solve


@dataclass(frozen=True, slots=True)
class Hosting:
    """The virtual pods existing capacity holds, and how many each node holds."""

    pods: tuple[Pod, ...] = ()
    hosts: Mapping[str, int] = field(default_factory=dict)


NONE = Hosting()


def hosting(
    cluster: Cluster, options: Options, reuse: Reuse | None, waiting: Sequence[Pod]
) -> Hosting:
    """The snapshot's hosting (``waiting``: the pending pods and those of in-flight nodes, as
    every what-if schedules them); one baseline pass per snapshot, none without buffers."""
    if not cluster.virtual_pods:
        return NONE
    if reuse is None:
        return _baseline(cluster, options, None, waiting)
    return reuse.derived(
        cluster, "disruption.headroom", lambda: _baseline(cluster, options, reuse, waiting)
    )


def _baseline(
    cluster: Cluster, options: Options, reuse: Reuse | None, waiting: Sequence[Pod]
) -> Hosting:
    results = solve(
        cluster,
        [*waiting, *cluster.virtual_pods],
        options,
        reuse=reuse,
        reservation_mode=FALLBACK,
        repack=False,
    )
    hosts: dict[str, int] = {}
    hosted: set[str] = set()
    for node, pods in results.existing:
        for pod in pods:
            if is_virtual(pod):
                hosts[node] = hosts.get(node, 0) + 1
                hosted.add(pod.key)
    pods = tuple(p for p in cluster.virtual_pods if p.key in hosted)
    return Hosting(pods, dict(sorted(hosts.items())))
