"""The kube-scheduler's binding, emulated, and consolidation's refusal of commands it strands."""

from __future__ import annotations

from dataclasses import replace

from karpenter.core.disruption import repack
from karpenter.core.disruption.context import new_pass
from karpenter.core.disruption.planner import decide
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node
from karpenter.core.model.nodepool import Budget, Disruption
from karpenter.core.model.pod import Owner, Pod
from karpenter.core.provisioning.binding import bind, surely_bound
from karpenter.core.provisioning.build import Reuse
from tests.support import builders as b

NOW = 1_800_000_000.0
HOUR = 3600.0
M1, M2, M4, M8, M16 = b.catalog()
POOL = b.nodepool(
    disruption=Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("100%"),)),
    requirements=b.term((lbl.CAPACITY_TYPE, "In", ["on-demand"])),
)
GUARD = {lbl.DO_NOT_DISRUPT: "true"}


def _node(name: str, it: InstanceType, zone: str = "zone-a") -> Node:
    return b.managed_node(name, it, zone=zone, creation=NOW - HOUR)


def _cluster(nodes: tuple[Node, ...], pods: tuple[Pod, ...]) -> Cluster:
    return b.cluster([POOL], nodes=nodes, pods=pods)


def _guarded(node: str, cpu: str) -> Pod:
    """A pod that keeps its node from being a candidate and uses ``cpu`` of it."""
    return b.bound(node, f"guard-{node}", cpu=cpu, annotations=GUARD)


def test_each_pod_goes_to_the_least_allocated_node_that_fits() -> None:
    """``a`` has 1.4 CPUs used, ``c`` 0.4: the first pod goes to ``c``; the second finds
    ``c`` at 1.4 too and then ``a`` scores equal, the first in order."""
    nodes = (_node("a", M4), _node("c", M4))
    cluster = _cluster(nodes, (_guarded("a", "1400m"), _guarded("c", "400m")))
    pods = [b.pod("p1", cpu="1"), b.pod("p2", cpu="1"), b.pod("p3", cpu="1")]
    bound = bind(cluster, pods, Options())
    assert bound.nodes == {"default/p1": "c", "default/p2": "a", "default/p3": "c"}
    assert bound.stranded == ()


def test_a_replicaset_pod_goes_where_fewest_of_its_replicaset_run() -> None:
    """System default spreading outweighs the resource scores: ``a`` is emptier but runs two
    of the ReplicaSet's pods, so its next pod goes to ``c``, which runs none; a pod without a
    controller goes to ``a``."""
    rs = (Owner("ReplicaSet", "web-1", "apps/v1", controller=True),)
    nodes = (_node("a", M8), _node("c", M4))
    cluster = _cluster(
        nodes,
        (
            b.bound("a", "w1", cpu="100m", owners=rs),
            b.bound("a", "w2", cpu="100m", owners=rs),
            _guarded("c", "1"),
        ),
    )
    web = b.pod("w3", cpu="100m", owners=rs)
    assert bind(cluster, [web], Options()).nodes == {"default/w3": "c"}
    assert bind(cluster, [b.pod("solo", cpu="100m")], Options()).nodes == {"default/solo": "a"}


def test_a_large_pod_arriving_last_is_stranded_where_first_fit_fits_it() -> None:
    """2.5 CPUs free on each of two nodes; two 1-CPU pods arrive first and take one CPU of
    each, so the 2.5-CPU pod fits neither (first fit, largest first, places all three)."""
    nodes = (_node("a", M4), _node("c", M4))
    cluster = _cluster(nodes, (_guarded("a", "1400m"), _guarded("c", "1400m")))
    pods = [b.pod("s1", cpu="1"), b.pod("s2", cpu="1"), b.pod("big", cpu="2500m")]
    bound = bind(cluster, pods, Options())
    assert bound.stranded == ("default/big",)
    assert set(bound.nodes) == {"default/s1", "default/s2"}
    assert bind(cluster, list(reversed(pods)), Options()).stranded == ()


def test_required_constraints_still_filter() -> None:
    """The binder uses the solver's filters: a node selector keeps a pod off the emptier
    node in the other zone."""
    nodes = (_node("a", M4, zone="zone-a"), _node("c", M4, zone="zone-b"))
    cluster = _cluster(nodes, (_guarded("a", "2"),))
    pinned = b.pod("p", cpu="1", node_selector={lbl.ZONE: "zone-a"})
    assert bind(cluster, [pinned], Options()).nodes == {"default/p": "a"}
    assert bind(cluster, [b.pod("q", cpu="1")], Options()).nodes == {"default/q": "c"}


def _fragile() -> Cluster:
    """``x`` holds two 1-CPU pods and a 2.5-CPU one (listed in that order, the order they are
    evicted in); ``a`` and ``c`` have 2.5 CPUs free each. First fit deletes ``x`` (the large
    pod on ``a``, the small ones on ``c``); the kube-scheduler would spread the small ones
    over both and leave the large one pending, and the provisioner would buy a node for it."""
    nodes, guards = _tight()
    pods = (
        b.bound("x", "s1", cpu="1"),
        b.bound("x", "s2", cpu="1"),
        b.bound("x", "big", cpu="2500m"),
    )
    return _cluster((*nodes, _node("x", M4)), (*guards, *pods))


def _tight() -> tuple[tuple[Node, ...], tuple[Pod, ...]]:
    """``a`` and ``c``: m-4x nodes that are no candidates, with 2.5 CPUs free each."""
    return (_node("a", M4), _node("c", M4)), (_guarded("a", "1400m"), _guarded("c", "1400m"))


def test_consolidation_refuses_a_delete_the_scheduler_would_strand() -> None:
    unchecked, _ = decide(
        _fragile(), Options(stranding_check=False), NOW, assume_consolidate_after_elapsed=True
    )
    assert unchecked is not None and unchecked.names == ("x",) and not unchecked.replacements
    command, ps = decide(_fragile(), Options(), NOW, assume_consolidate_after_elapsed=True)
    assert command is None
    notes = {n.name: n.reason for n in ps.notes}
    assert notes["x"].startswith("Strands: 1 evicted pod(s) would find no node"), notes
    assert "default/big" in notes["x"]


def test_a_delete_with_room_to_spare_still_goes_ahead() -> None:
    """With 3.5 CPUs free on each node the same pods fit however they arrive."""
    cluster = _fragile()
    pods = tuple(
        _guarded(p.node_name, "400m") if p.name.startswith("guard-") else p for p in cluster.pods
    )
    command, _ = decide(
        _cluster(cluster.nodes, pods), Options(), NOW, assume_consolidate_after_elapsed=True
    )
    assert command is not None and command.names == ("x",) and not command.replacements


def test_a_command_saving_more_than_the_stranded_pods_new_node_goes_ahead() -> None:
    """The same pods on an m-8x: the kube-scheduler still strands the large one, and the
    provisioner buys an m-4x for it, but deleting the m-8x saves more than that."""
    cluster = _fragile()
    nodes = tuple(_node("x", M8) if n.name == "x" else n for n in cluster.nodes)
    command, _ = decide(
        _cluster(nodes, cluster.pods), Options(), NOW, assume_consolidate_after_elapsed=True
    )
    assert command is not None and command.names == ("x",) and not command.replacements


def test_batch_delete_leaves_out_a_candidate_whose_pods_the_scheduler_would_strand() -> None:
    """``y``'s 1-CPU pod, then ``x``'s 1-CPU and 2.5-CPU pods: first fit deletes both (the
    large pod on ``a``, the small ones on ``c``); evicted in that order, the small ones take a
    CPU of each node and the large one fits neither. The pool launches only m-8x now, so the
    node bought for it costs what deleting both m-4x saves: only ``y`` gathers (no command)."""
    pool = b.nodepool(
        disruption=Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("100%"),)),
        requirements=b.term(
            (lbl.CAPACITY_TYPE, "In", ["on-demand"]), (lbl.INSTANCE_TYPE, "In", [M8.name])
        ),
    )
    nodes, guards = _tight()
    pods = (
        b.bound("y", "s2", cpu="1"),
        b.bound("x", "s1", cpu="1"),
        b.bound("x", "big", cpu="2500m"),
    )
    more = (_node("x", M4), _node("y", M4))
    cluster = b.cluster([pool], nodes=(*nodes, *more), pods=(*guards, *pods))

    def gathered(options: Options) -> tuple[str, ...] | None:
        ps = new_pass(cluster, options, NOW)
        by_name = {c.name: c for c in ps.candidates}
        command = repack.batch_delete(ps, [by_name["y"], by_name["x"]])
        return None if command is None else command.names

    assert gathered(Options(stranding_check=False)) == ("y", "x")
    assert gathered(Options()) is None


def test_joined_nodes_bind_as_nodes_of_the_snapshot_would() -> None:
    """A command's replacements, joined to the pass's set-up, take pods as the same nodes in
    the snapshot would (the stranding check joins them instead of building a snapshot)."""
    base = _cluster((_node("a", M4),), (_guarded("a", "1400m"),))
    extra = (_node("r1", M2), _node("r2", M4))
    pods = [b.pod(f"p{i}", cpu=cpu) for i, cpu in enumerate(("1", "2500m", "1", "500m", "3"))]
    reuse = Reuse()
    joined = bind(base, pods, Options(), reuse=reuse, joined=extra, buy=True)
    whole = bind(_cluster((*base.nodes, *extra), base.pods), pods, Options(), buy=True)
    assert joined.nodes == whole.nodes and joined.stranded == whole.stranded
    assert [c.launch.instance_type for c in joined.claims] == [
        c.launch.instance_type for c in whole.claims
    ]
    assert set(joined.nodes.values()) >= {"r1", "r2"}


def test_the_room_test_passes_only_where_nothing_can_be_stranded() -> None:
    """``surely_bound`` says yes where room to spare makes any order safe, and no on the
    fragile fleet where the order decides."""
    fragile = _fragile()
    evicted = [replace(p, node_name="") for p in fragile.pods if p.node_name == "x"]
    assert not surely_bound(fragile, evicted, excluded_nodes=frozenset({"x"}), reuse=Reuse())
    nodes = (*fragile.nodes, _node("big", M16))
    roomy = _cluster(nodes, fragile.pods)
    assert surely_bound(roomy, evicted, excluded_nodes=frozenset({"x"}), reuse=Reuse())
    assert bind(roomy, evicted, Options(), excluded_nodes=frozenset({"x"})).stranded == ()
