"""Upstream's performance scenarios (kubernetes-sigs/karpenter test/suites/performance) as data.

Each scenario is a list of phases run in order on one cluster: create Deployments and wait for
every pod Running (scale-out), scale Deployments down and wait for the fleet to settle
(consolidation), or change the NodePool template and wait for every node to be replaced
(drift). Shapes follow upstream's files: pods request CPU and memory only, carry
``app=<deployment>`` and ``testing/cluster=unspecified``, run the pause image with the default
30 s grace period; ``hostname spread`` is a DoNotSchedule spread over
``kubernetes.io/hostname`` with max skew 1; ``do-not-disrupt`` is the
``karpenter.sh/do-not-disrupt`` annotation. ``limit_s`` is upstream's threshold for the phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

NAMESPACE = "default"
IMAGE = "public.ecr.aws/eks-distro/kubernetes/pause:3.2"
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


@dataclass(frozen=True)
class Workload:
    """One Deployment of a scenario."""

    name: str
    replicas: int
    cpu: str
    memory: str
    hostname_spread: bool = False
    zone_spread: bool = False
    anti_affinity: bool = False
    do_not_disrupt: bool = False

    def labels(self) -> dict[str, str]:
        return {"app": self.name, "testing/cluster": "unspecified"}

    def manifest(self) -> dict[str, Any]:
        """The Deployment."""
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.name, "namespace": NAMESPACE},
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": self.labels()},
                "template": {"metadata": self._pod_meta(), "spec": self._pod_spec()},
            },
        }

    def _pod_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"labels": self.labels()}
        if self.do_not_disrupt:
            meta["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
        return meta

    def _pod_spec(self) -> dict[str, Any]:
        requests = {"cpu": self.cpu, "memory": self.memory}
        spec: dict[str, Any] = {
            "containers": [{"name": "app", "image": IMAGE, "resources": {"requests": requests}}]
        }
        wanted = ((ZONE, self.zone_spread), (HOST, self.hostname_spread))
        spreads = [key for key, on in wanted if on]
        if spreads:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": key,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": self.labels()},
                }
                for key in spreads
            ]
        if self.anti_affinity:
            term = {"topologyKey": HOST, "labelSelector": {"matchLabels": self.labels()}}
            spec["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        return spec


@dataclass(frozen=True)
class Phase:
    """``scale-out`` (create ``workloads``), ``consolidation`` (scale to ``replicas``) or
    ``drift`` (change the NodePool template); ``pods`` is the pod count it ends with."""

    kind: str
    pods: int
    limit_s: float
    workloads: Sequence[Workload] = ()
    replicas: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    phases: Sequence[Phase]


def _small(n: int, **kw: Any) -> Workload:
    return Workload("small-resource-app", n, "900m", "3100Mi", **kw)


def _large(n: int, **kw: Any) -> Workload:
    return Workload("large-resource-app", n, "3500m", "28Gi", **kw)


def _two(small: int, large: int) -> dict[str, int]:
    return {"small-resource-app": small, "large-resource-app": large}


_WIDE_CPU = (
    "240m 450m 650m 900m 1400m 1900m 2400m 2800m 3300m 3700m "
    "2300m 900m 1300m 2800m 1800m 1850m 3300m 3800m 225m 450m "
    "700m 900m 1300m 1800m 2400m 2800m 3400m 3800m 3300m 2800m"
).split()
_WIDE_MEMORY = (
    "300Mi 400Mi 700Mi 1Gi 2Gi 4Gi 8Gi 4Gi 16Gi 10Gi "
    "64Gi 30Gi 32Gi 32Gi 30Gi 20Gi 30Gi 300Mi 500Mi 750Mi "
    "1Gi 2Gi 4Gi 8Gi 16Gi 32Gi 28Gi 64Gi 13Gi 24Gi"
).split()


def _wide() -> Scenario:
    """30 Deployments, zone-spread, 1–3 with hostname anti-affinity, 4–6 hostname-spread."""
    workloads = [
        Workload(
            f"wide-deployment-{i + 1}",
            35 if i < 20 else 30,
            _WIDE_CPU[i],
            _WIDE_MEMORY[i],
            zone_spread=True,
            anti_affinity=i < 3,
            hostname_spread=3 <= i < 6,
        )
        for i in range(30)
    ]
    scale_in = {w.name: 25 if i < 20 else 20 for i, w in enumerate(workloads)}
    return Scenario(
        "wide",
        (
            Phase("scale-out", 1000, 300, tuple(workloads)),
            Phase("consolidation", 700, 2400, replicas=scale_in),
        ),
    )


def scenarios(scale: float = 1.0) -> dict[str, Scenario]:
    """Every scenario; ``scale`` < 1 shrinks pod counts (a quick run, not upstream's shape)."""

    def n(count: int) -> int:
        return max(1, round(count * scale))

    spread = {"hostname_spread": True}
    out = [
        Scenario(
            "basic",
            (
                Phase("scale-out", n(1000), 120, (_small(n(500)), _large(n(500)))),
                Phase("consolidation", n(700), 1200, replicas=_two(n(350), n(350))),
            ),
        ),
        Scenario(
            "do-not-disrupt",
            (
                Phase(
                    "scale-out",
                    n(1100),
                    240,
                    (
                        _small(n(500), **spread),
                        _large(n(500)),
                        Workload(
                            "do-not-disrupt-app", n(100), "900m", "450Mi", do_not_disrupt=True
                        ),
                    ),
                ),
                Phase("consolidation", n(600), 2100, replicas=_two(n(250), n(250))),
            ),
        ),
        Scenario(
            "drift",
            (
                Phase(
                    "scale-out",
                    n(600),
                    300,
                    (
                        Workload("hostname-spread-app", n(300), "900m", "3100Mi", **spread),
                        Workload("standard-app", n(300), "3500m", "28Gi"),
                    ),
                ),
                Phase("drift", n(600), 3000),
            ),
        ),
        Scenario(
            "hostname-spread",
            (
                Phase("scale-out", n(1000), 300, (_small(n(500), **spread), _large(n(500)))),
                Phase("consolidation", n(700), 1800, replicas=_two(n(350), n(350))),
            ),
        ),
        Scenario(
            "xl",
            (
                Phase("scale-out", n(2000), 2100, (_small(n(1000), **spread), _large(n(1000)))),
                Phase("consolidation", n(1400), 1500, replicas=_two(n(700), n(700))),
            ),
        ),
    ]
    # Not upstream's: one Deployment's burst, the commonest shape of a scale-up (every pod
    # alike, so no nomination is published: ``controllers/nominations.py``).
    out.append(
        Scenario(
            "one-deployment",
            (
                Phase("scale-out", n(1000), 120, (_small(n(1000)),)),
                Phase("consolidation", n(700), 1200, replicas={"small-resource-app": n(700)}),
            ),
        )
    )
    if scale == 1.0:
        out.append(_wide())
    return {s.name: s for s in out}
