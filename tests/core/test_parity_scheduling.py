"""Upstream scheduling rules: claimless managed nodes' startup taints, affinity bootstrap, and
anti-affinity's late commitment (each table row is one upstream behaviour)."""

from __future__ import annotations

import pytest

from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.node import Node
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.results import Results
from karpenter.core.provisioning.scheduler import solve
from karpenter.core.scheduling.taints import Taint
from tests.support import builders as b

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
POOL = "karpenter.sh/nodepool"
STARTUP = Taint("example.com/agent-not-ready", "NoSchedule")


def run(c: Cluster, pods: list[Pod]) -> Results:
    return solve(c, pods, Options())


def claimless(name: str, taints: tuple[Taint, ...], **labels: str) -> Node:
    """A managed Node (nodepool label) that has no NodeClaim."""
    return b.node(name, labels={POOL: "default", **labels}, taints=taints)


@pytest.mark.parametrize(
    ("labels", "taints", "lands"),
    [
        pytest.param({}, (STARTUP,), True, id="uninitialized-pool-startup-taint-ignored"),
        pytest.param(
            {},
            (Taint(STARTUP.key, STARTUP.effect, "other-value"),),
            True,
            id="startup-taint-matched-by-key-and-effect",
        ),
        pytest.param(
            {},
            (STARTUP, Taint("node.kubernetes.io/not-ready", "NoSchedule")),
            True,
            id="startup-and-ephemeral-taints-ignored",
        ),
        pytest.param(
            {},
            (Taint("readiness.k8s.io/network", "NoSchedule"),),
            True,
            id="readiness-gate-taint-ignored",
        ),
        pytest.param(
            {"karpenter.sh/initialized": "true"},
            (STARTUP,),
            False,
            id="initialized-node-startup-taint-counts",
        ),
        pytest.param({}, (Taint("dedicated", "NoSchedule"),), False, id="other-taint-still-repels"),
    ],
)
def test_claimless_managed_node_inherits_pool_startup_taints(
    labels: dict[str, str], taints: tuple[Taint, ...], lands: bool
) -> None:
    """A managed Node without a NodeClaim ignores its NodePool's startup taints (and ephemeral
    taints) until it is initialized, so a pending pod is placed on it instead of a new claim."""
    pool = b.nodepool(startup_taints=(STARTUP,))
    node = claimless("n1", taints, **labels)
    r = run(b.cluster((pool,), nodes=(node,)), [b.pod("p")])
    assert (r.existing[0][0] == "n1" if lands else not r.existing) and (
        bool(r.new_claims) is not lands
    )


def test_claimless_node_of_other_pool_keeps_taint() -> None:
    """Only the node's own NodePool's startup taints are ignored."""
    pools = (b.nodepool(), b.nodepool("other", startup_taints=(STARTUP,)))
    node = claimless("n1", (STARTUP,))
    r = run(b.cluster(pools, nodes=(node,)), [b.pod("p")])
    assert not r.existing and len(r.new_claims) == 1


def _self_affine(name: str, key: str, zones: list[str] | None = None) -> Pod:
    terms = (b.term((ZONE, "In", zones)),) if zones else ()
    return b.pod(
        name,
        labels={"app": "db"},
        required_affinity=(b.affinity_term(key, app="db"),),
        required_node_terms=terms,
    )


@pytest.mark.parametrize(
    ("existing_zone", "pod_zones", "outcome"),
    [
        pytest.param(None, None, "new", id="no-matching-pod-anywhere-opens-domain"),
        pytest.param("zone-a", None, "zone-a", id="joins-the-populated-zone"),
        pytest.param(
            "zone-a", ["zone-b", "zone-c"], "new", id="populated-zone-forbidden-opens-new"
        ),
        pytest.param("zone-a", ["zone-a", "zone-b"], "zone-a", id="populated-zone-allowed-joins"),
    ],
)
def test_self_affinity_zone_bootstrap(
    existing_zone: str | None, pod_zones: list[str] | None, outcome: str
) -> None:
    """A self-affine pod opens a new zone when no matching pod exists or when every zone holding
    one is ruled out by its own requirements; otherwise it must join a populated zone."""
    nodes: tuple[Node, ...] = ()
    bound: tuple[Pod, ...] = ()
    if existing_zone:
        nodes = (b.node("n1", cpu="1", labels={ZONE: existing_zone}),)
        bound = (b.bound("n1", "db-0", labels={"app": "db"}, cpu="900m"),)
    r = run(b.cluster(nodes=nodes, pods=bound), [_self_affine("p", ZONE, pod_zones)])
    assert not r.unschedulable
    zone = r.new_claims[0].launch.zone
    if outcome == "new":
        assert zone in (pod_zones or b.ZONES) and zone != existing_zone
    else:
        assert zone == outcome


def test_self_affinity_hostname_cannot_open_when_joinable_host_exists() -> None:
    """A hostname self-affine pod whose matching pods sit on a full node stays pending: the node
    is a compatible domain, so the pod may not bootstrap a new host."""
    node = b.node("n1", cpu="1", labels={ZONE: "zone-a"})
    bound = b.bound("n1", "db-0", labels={"app": "db"}, cpu="900m")
    r = run(b.cluster(nodes=(node,), pods=(bound,)), [_self_affine("p", HOST)])
    assert "default/p" in r.unschedulable and not r.new_claims


def test_self_affinity_two_incompatible_pods_open_two_zones() -> None:
    """Two self-affine pods pinned to different zones each open their own zone (upstream: two
    nodes when matching pods have incompatible selectors)."""
    pods = [_self_affine("p1", ZONE, ["zone-b"]), _self_affine("p2", ZONE, ["zone-c"])]
    r = run(b.cluster(), pods)
    assert not r.unschedulable
    assert sorted(c.launch.zone for c in r.new_claims) == ["zone-b", "zone-c"]


def _anti(name: str, *, owner: bool, selected: bool, cpu: str = "1", **kw: object) -> Pod:
    return b.pod(
        name,
        cpu=cpu,
        labels={"app": "zk"} if selected else {},
        required_anti_affinity=(b.affinity_term(ZONE, app="zk"),) if owner else (),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("pods", "placed", "pending"),
    [
        pytest.param(
            [_anti(f"z{i}", owner=True, selected=True) for i in range(3)],
            1,
            2,
            id="self-anti-affinity-one-per-pass",
        ),
        pytest.param(
            [
                _anti("owner", owner=True, selected=False, cpu="2"),
                _anti("p", owner=False, selected=True),
            ],
            1,
            1,
            id="schroedinger-inverse-blocks-every-zone",
        ),
        pytest.param(
            [
                _anti("p", owner=False, selected=True, cpu="2"),
                _anti("owner", owner=True, selected=False),
            ],
            1,
            1,
            id="other-schedules-first-owner-blocked",
        ),
    ],
)
def test_anti_affinity_late_commitment(pods: list[Pod], placed: int, pending: int) -> None:
    """A pod on a claim that still spans several zones counts in every one of them for
    anti-affinity, so later anti-affine pods of the same pass find no empty zone."""
    r = run(b.cluster(), pods)
    assert sum(len(c.pods) for c in r.new_claims) == placed
    assert len(r.unschedulable) == pending


def test_anti_affinity_claim_narrowed_to_all_empty_zones() -> None:
    """A new claim's zone requirement is every empty zone the pod and pool allow, not one."""
    node = b.node("n1", cpu="1", labels={ZONE: "zone-a"})
    bound = b.bound("n1", "zk-0", labels={"app": "zk"}, cpu="900m")
    pod = _anti("p", owner=True, selected=True)
    r = run(b.cluster(nodes=(node,), pods=(bound,)), [pod])
    req = r.new_claims[0].requirements.get(ZONE)
    assert req is not None and sorted(req.values) == ["zone-b", "zone-c"]
    assert r.new_claims[0].launch.zone in ("zone-b", "zone-c")


def test_anti_affinity_next_pass_uses_remaining_zone() -> None:
    """Once earlier claims have launched into zones, the next pass places one more pod in the
    zone left empty, and nothing once every zone is taken."""
    nodes = tuple(b.node(f"n-{z}", cpu="1", labels={ZONE: z}) for z in ("zone-a", "zone-b"))
    bound = tuple(
        b.bound(f"n-{z}", f"zk-{z}", labels={"app": "zk"}, cpu="900m") for z in ("zone-a", "zone-b")
    )
    c = b.cluster(nodes=nodes, pods=bound)
    r = run(c, [_anti(f"z{i}", owner=True, selected=True) for i in range(2)])
    assert [cl.launch.zone for cl in r.new_claims] == ["zone-c"] and len(r.unschedulable) == 1
