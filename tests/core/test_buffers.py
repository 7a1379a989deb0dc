"""CapacityBuffers in the core: sizing, the Provisioning condition, and headroom that disruption
keeps (neither emptied nor replaced in a loop).

Catalog (tests.support.builders.catalog): m-1x/2x/4x/8x/16x with 1..16 CPU at 0.09, 0.18,
0.36, 0.72, 1.44 USD/h on-demand (half on spot), 100m CPU overhead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from karpenter.core import buffers
from karpenter.core.disruption import headroom
from karpenter.core.disruption.planner import decide, plan
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.node import Node
from karpenter.core.model.nodepool import Budget, Disruption, NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.scheduler import solve
from tests.support import builders as b

NOW = 1_800_000_000.0
M1, M2, M4, M8, M16 = b.catalog()
ON_DEMAND = b.term((lbl.CAPACITY_TYPE, "In", ["on-demand"]))


@pytest.mark.parametrize(
    ("replicas", "percentage", "scalable", "limits", "expected"),
    [
        pytest.param(3, None, None, None, 3, id="replicas"),
        pytest.param(None, 20, 10, None, 2, id="percentage-of-workload"),
        pytest.param(None, 25, 5, None, 2, id="percentage-rounds-up"),
        pytest.param(None, 1, 3, None, 1, id="percentage-at-least-one"),
        pytest.param(None, 0, 10, None, 0, id="zero-percentage"),
        pytest.param(None, 50, 0, None, 0, id="workload-scaled-to-zero"),
        pytest.param(1, 50, 10, None, 5, id="replicas-and-percentage-take-the-larger"),
        pytest.param(6, 50, 10, None, 6, id="replicas-larger"),
        pytest.param(None, 100, 10, {"cpu": "8"}, 4, id="limits-cap-percentage"),
        pytest.param(None, None, None, {"cpu": "5"}, 2, id="limits-alone-floor"),
        pytest.param(None, 20, None, None, 0, id="percentage-without-scalable-ignored"),
        pytest.param(3, None, None, {"nvidia.com/gpu": "1"}, 3, id="unrelated-limit-ignored"),
    ],
)
def test_desired_replicas(
    replicas: int | None,
    percentage: int | None,
    scalable: int | None,
    limits: dict[str, str] | None,
    expected: int,
) -> None:
    """Chunks: the larger of replicas and percentage-of-workload (rounded up, at least one),
    capped by how many 2-CPU chunks fit the limits; limits alone when neither is set."""
    chunk = b.pod("chunk", cpu="2", memory="1Gi")
    buf = buffers.Buffer(
        "team", "web", chunk, replicas, res.parse(limits) if limits else None, percentage, scalable
    )
    assert buffers.desired_replicas(buf) == expected


def test_virtual_pods_are_sanitized_and_named_as_upstream() -> None:
    """Virtual pods are named capacity-buffer-<name>-<i> from 1, lowest priority, marked
    Unschedulable, never bound, and drop PVC and ephemeral volumes (no claim exists for them)."""
    chunk = replace(
        b.pod("t", cpu="1", node_name="somewhere"), pvc_names=("data",), ephemeral_volume_count=1
    )
    pods = buffers.virtual_pods(buffers.Buffer("team", "web", chunk, 2, uid="abc"))
    assert [(p.key, p.uid) for p in pods] == [
        ("team/capacity-buffer-web-1", "abc-1"),
        ("team/capacity-buffer-web-2", "abc-2"),
    ]
    assert all(
        buffers.is_virtual(p)
        and buffers.buffer_of(p) == "team/web"
        and not p.node_name
        and not p.pvc_names
        and not p.ephemeral_volume_count
        and p.priority == buffers.VIRTUAL_POD_PRIORITY
        for p in pods
    )


def _buffer(replicas: int, cpu: str = "1", name: str = "web") -> tuple[Pod, ...]:
    return buffers.virtual_pods(buffers.Buffer("default", name, b.pod("chunk", cpu=cpu), replicas))


@pytest.mark.parametrize(
    ("nodes", "replicas", "ready", "expected"),
    [
        pytest.param((), 3, True, ("False", buffers.REQUIRES_NEW), id="needs-new-claim"),
        pytest.param(
            (b.node("room", cpu="4"),), 3, True, ("True", buffers.FITS_EXISTING), id="fits"
        ),
        pytest.param(
            (b.node("small", cpu="2"),), 3, True, ("False", buffers.REQUIRES_NEW), id="partly"
        ),
        pytest.param((), 0, True, ("False", buffers.EMPTY), id="empty"),
        pytest.param((), 3, False, ("False", buffers.NOT_READY), id="not-ready"),
    ],
)
def test_provisioning_condition(
    nodes: tuple[Node, ...], replicas: int, ready: bool, expected: tuple[str, str]
) -> None:
    """After a pass, Provisioning is True only when every virtual pod fits existing capacity;
    pods needing a new NodeClaim make it False (RequiresNewCapacity), as upstream."""
    virtual = _buffer(replicas)
    results = solve(b.cluster(nodes=nodes), list(virtual), Options())
    placed = buffers.placements(results, virtual).get("default/web")
    condition = buffers.provisioning_condition(ready, replicas, placed)
    assert condition is not None and (condition.status, condition.reason) == expected


def test_provisioning_condition_unchanged_when_the_pass_saw_no_virtual_pod() -> None:
    """A ready, non-empty buffer none of whose pods the pass saw keeps its condition."""
    assert buffers.provisioning_condition(True, 2, None) is None


# ---- disruption keeps the headroom -----------------------------------------------------------
def _pool(**kw: Any) -> NodePool:
    kw.setdefault("requirements", ON_DEMAND)
    disruption = Disruption("WhenEmptyOrUnderutilized", 0.0, (Budget("100%"),))
    return b.nodepool(disruption=disruption, **kw)


def _node(name: str, it: Any, **kw: Any) -> Node:
    kw.setdefault("creation", NOW - 3600.0)
    return b.managed_node(name, it, **kw)


def _cluster(nodes: tuple[Node, ...], pods: tuple[Pod, ...] = (), **kw: Any) -> Cluster:
    return b.cluster((kw.pop("pool", None) or _pool(),), nodes=nodes, pods=pods, **kw)


def _steps(cluster: Cluster) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [
        (
            s.command.reason,
            s.command.names,
            tuple(r.launch.instance_type for r in s.command.replacements),
        )
        for s in plan(cluster, Options(), NOW).steps
    ]


def test_headroom_node_is_not_emptied() -> None:
    """A node whose only occupants are a buffer's virtual pods hosts headroom: it is not empty,
    and no command removes it (without the buffer it is emptied at once)."""
    headroom_node = _node("h", M2)
    assert _steps(_cluster((headroom_node,))) == [("Empty", ("h",), ())]
    assert _steps(_cluster((headroom_node,), virtual_pods=_buffer(1, cpu="1500m"))) == []


def test_oversized_headroom_is_replaced_once_by_a_cheaper_node_that_holds_it() -> None:
    """Headroom of two 1-CPU chunks on an 8-CPU node is replaced by the cheapest node that holds
    both chunks (a 4-CPU one: 100m overhead), and then left alone: no loop."""
    cluster = _cluster((_node("big", M8),), virtual_pods=_buffer(2))
    assert _steps(cluster) == [("Underutilized", ("big",), ("m-4x",))]


def test_headroom_moves_to_room_elsewhere_and_the_host_goes() -> None:
    """When another node has room for the chunks, the spare node may go: the buffer is
    still held (by the other node), so the provisioner will not buy it again."""
    nodes = (_node("h", M2), _node("busy", M4))
    pods = (b.bound("busy", "p1", cpu="1"),)
    cluster = _cluster(nodes, pods, virtual_pods=_buffer(1))
    steps = plan(cluster, Options(), NOW)
    assert [(s.command.reason, s.command.names) for s in steps.steps] == [("Empty", ("h",))]
    after = headroom.hosting(steps.final, Options(), None, ())
    assert dict(after.hosts) == {"busy": 1}
    again = solve(steps.final, list(steps.final.virtual_pods), Options())
    assert not again.new_claims


def test_consolidation_does_not_spend_the_headroom_on_real_pods() -> None:
    """A node's pods could move into the buffer's room on another node; doing so needs a
    replacement for the headroom, which is not cheaper, so nothing happens (without the
    buffer the node is deleted and its pod takes the room)."""
    nodes = (_node("h", M2), _node("busy", M2))
    pods = (b.bound("busy", "p1", cpu="1"),)
    assert _steps(_cluster(nodes, pods)) == [("Empty", ("h",), ())]
    assert _steps(_cluster(nodes, pods, virtual_pods=_buffer(1))) == []


def test_consolidation_refuses_to_leave_hosted_buffer_pods_without_room() -> None:
    """When no replacement big enough may launch (NodePool limits leave room for a 1-CPU node
    only), removing the headroom node would leave the buffer's pod homeless: consolidation
    refuses and says why."""
    pool = _pool(limits=res.parse({"cpu": "3"}))
    nodes = (_node("h", M2), _node("busy", M2))
    pods = (b.bound("busy", "p1", cpu="1"),)
    cluster = _cluster(nodes, pods, virtual_pods=_buffer(1), pool=pool)
    command, ps = decide(cluster, Options(), NOW, assume_consolidate_after_elapsed=True)
    assert command is None
    assert any("capacity buffer pod(s) would lose their room" in n.reason for n in ps.notes)


def test_drift_replaces_a_headroom_node_with_room_for_the_buffer() -> None:
    """Drift still replaces a node hosting headroom (upstream allows it); its replacement is
    sized to hold the buffer's pods, so the headroom survives the replacement."""
    drifted = _node("h", M2, annotations={lbl.NODEPOOL_HASH: "old"})
    drifted = replace(drifted, annotations={**drifted.annotations, lbl.NODEPOOL_HASH_VERSION: "v3"})
    cluster = _cluster((drifted,), virtual_pods=_buffer(1, cpu="1500m"))
    command, _ = decide(cluster, Options(), NOW, assume_consolidate_after_elapsed=True)
    assert command is not None and command.reason == "Drifted"
    assert [r.launch.instance_type for r in command.replacements] == ["m-2x"]
    assert [p.name for r in command.replacements for p in r.pods] == ["capacity-buffer-web-1"]
