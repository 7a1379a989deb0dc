"""The conditions users watch, as pure rules: Consolidatable, NodeRegistrationHealthy, the node
shape consistency check, and CapacityBuffer headroom."""

from __future__ import annotations

import pytest

from karpenter.core import buffers, consistency, registration
from karpenter.core.consolidatable import consolidatable
from karpenter.core.disruption.planner import decide
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Options
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.nodepool import Budget, Disruption, NodePool
from karpenter.core.provisioning.scheduler import solve
from tests.support import builders as b

T0 = 1_000_000.0


def _pool(after: float | None) -> NodePool:
    return b.nodepool(disruption=Disruption("WhenEmptyOrUnderutilized", after, (Budget("10%"),)))


@pytest.mark.parametrize(
    ("after", "initialized", "last_event", "now", "expected", "recheck"),
    [
        pytest.param(None, True, None, T0 + 999, False, None, id="never-no-condition"),
        pytest.param(60.0, False, None, T0 + 999, False, None, id="uninitialized-no-condition"),
        pytest.param(60.0, True, None, T0 + 30, False, T0 + 60, id="from-initialized-waiting"),
        pytest.param(60.0, True, None, T0 + 60, True, None, id="from-initialized-elapsed"),
        pytest.param(60.0, True, T0 + 100, T0 + 120, False, T0 + 160, id="pod-event-restarts"),
        pytest.param(60.0, True, T0 + 100, T0 + 160, True, None, id="pod-event-elapsed"),
        pytest.param(0.0, True, T0 + 100, T0 + 100, True, None, id="zero-after-at-once"),
    ],
)
def test_consolidatable_after_last_pod_event(
    after: float | None,
    initialized: bool,
    last_event: float | None,
    now: float,
    expected: bool,
    recheck: float | None,
) -> None:
    """Consolidatable holds once consolidateAfter has elapsed since the last pod event (or the
    Initialized transition), never for uninitialized claims or a Never policy."""
    claim = NodeClaim(
        "c",
        initialized=initialized,
        last_pod_event=last_event,
        initialized_at=T0 if initialized else None,
    )
    verdict = consolidatable(claim, _pool(after), now)
    assert (verdict.consolidatable, verdict.recheck_at) == (expected, recheck)


@pytest.mark.parametrize(
    ("last_event", "now", "expected"),
    [
        pytest.param(None, T0 + 59, False, id="initialized-late-window-open"),
        pytest.param(None, T0 + 60, True, id="initialized-late-window-closed"),
        pytest.param(T0 + 30, T0 + 89, False, id="pod-event-after-initialized"),
        pytest.param(T0 + 30, T0 + 90, True, id="pod-event-window-closed"),
    ],
)
def test_disruption_clock_agrees_with_the_condition(
    last_event: float | None, now: float, expected: bool
) -> None:
    """The disruption core starts consolidateAfter where the Consolidatable condition does: at
    the last pod event, else at the Initialized transition (not at the claim's creation, an
    hour earlier here), so an empty node is disrupted exactly when the condition turns True."""
    pool = _pool(60.0)
    it = b.catalog()[0]
    node = b.managed_node("n1", it, creation=T0 - 3600.0)
    claim = NodeClaim(
        "n1",
        "default",
        labels=dict(node.labels),
        provider_id=node.provider_id,
        node_name="n1",
        launched=True,
        registered=True,
        initialized=True,
        creation=T0 - 3600.0,
        last_pod_event=last_event,
        initialized_at=T0,
    )
    cluster = b.cluster((pool,), nodes=(node,), nodeclaims=(claim,))
    command, _ = decide(cluster, Options(), now)
    condition = consolidatable(claim, pool, now).consolidatable
    assert condition is expected
    assert (command is not None and command.reason == "Empty") is expected


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        pytest.param((), "Unknown", id="empty-unknown"),
        pytest.param((True,), "True", id="one-success"),
        pytest.param((False,), "True", id="one-failure-of-four-still-healthy"),
        pytest.param((True, False, False), "False", id="two-failures-unhealthy"),
        pytest.param((False, False, True, True, True, True), "True", id="failures-age-out"),
        pytest.param((True, True, False, False), "False", id="half-failed"),
    ],
)
def test_registration_window(outcomes: tuple[bool, ...], status: str) -> None:
    """A pool is unhealthy once half of its last four launches failed to register."""
    history = registration.History()
    for ok in outcomes:
        history = history.record(ok)
    assert history.status == status


@pytest.mark.parametrize(
    ("seed", "registered", "current", "written"),
    [
        pytest.param(None, True, None, "True", id="first-success-sets-true"),
        pytest.param("True", True, "True", None, id="already-true-no-write"),
        pytest.param(None, False, None, None, id="one-failure-no-flip"),
        pytest.param("True", False, "True", None, id="one-failure-after-healthy"),
        pytest.param("False", False, "False", None, id="already-false"),
        pytest.param("False", True, "False", None, id="one-success-not-enough"),
    ],
)
def test_registration_transitions(
    seed: str | None, registered: bool, current: str | None, written: str | None
) -> None:
    """The condition flips True on a success leaving the window healthy, False on a failure
    leaving it unhealthy; a restarted controller seeds the window from the stored condition."""
    assert registration.transition(registration.seeded(seed), registered, current) == written


@pytest.mark.parametrize(
    ("condition_gen", "pool_gen", "observed_class", "class_gen", "reset"),
    [
        pytest.param(None, 1, None, None, True, id="no-condition-yet"),
        pytest.param(1, 1, None, None, False, id="no-nodeclass-kind-pool-unchanged"),
        pytest.param(1, 2, None, None, True, id="pool-edited"),
        pytest.param(1, 1, 3, 3, False, id="nodeclass-unchanged"),
        pytest.param(1, 1, 3, 4, True, id="nodeclass-edited"),
        pytest.param(1, 1, None, 1, True, id="nodeclass-never-observed"),
    ],
)
def test_registration_reset(
    condition_gen: int | None,
    pool_gen: int,
    observed_class: int | None,
    class_gen: int | None,
    reset: bool,
) -> None:
    """NodeRegistrationHealthy goes back to Unknown when the NodePool or its NodeClass changed
    since the condition was last reset (upstream's two generations)."""
    assert registration.needs_reset(condition_gen, pool_gen, observed_class, class_gen) is reset


def test_registration_two_failures_flip_false() -> None:
    """Two failed registrations in a row after a healthy start turn the pool unhealthy."""
    history = registration.seeded("True").record(False)
    assert registration.transition(history, False, "True") == "False"


def _shape(claim_cpu: str, node_cpu: str, **kw: object) -> list[str]:
    claim = NodeClaim(
        "c",
        requests=res.parse({"cpu": "1"}),
        capacity=res.parse({"cpu": claim_cpu, "memory": "8Gi"}),
        initialized=kw.pop("initialized", True),  # type: ignore[arg-type]
        deleting=kw.pop("deleting", False),  # type: ignore[arg-type]
    )
    cap = res.parse({"cpu": node_cpu, "memory": "1Gi"})
    return consistency.node_shape_issues(claim, Node("n", {}, {}, (), cap, cap))


@pytest.mark.parametrize(
    ("claim_cpu", "node_cpu", "kw", "issues"),
    [
        pytest.param("4", "4", {}, [], id="as-expected"),
        pytest.param("4", "3600m", {}, [], id="ninety-percent-ok"),
        pytest.param(
            "4",
            "3",
            {},
            ["expected 4 of resource cpu, but found 3 (75.0% of expected)"],
            id="cpu-short",
        ),
        pytest.param("4", "3", {"initialized": False}, [], id="uninitialized-skipped"),
        pytest.param("4", "3", {"deleting": True}, [], id="deleting-skipped"),
    ],
)
def test_node_shape(
    claim_cpu: str, node_cpu: str, kw: dict[str, object], issues: list[str]
) -> None:
    """A resource the claim requested must reach 90% of the expected capacity on the Node;
    resources not requested (memory here) are not checked."""
    assert _shape(claim_cpu, node_cpu, **kw) == issues


@pytest.mark.parametrize(
    ("replicas", "limits", "expected"),
    [
        pytest.param(3, None, 3, id="replicas"),
        pytest.param(None, {"cpu": "5"}, 2, id="limits-alone-floor"),
        pytest.param(4, {"cpu": "5"}, 2, id="limits-cap-replicas"),
        pytest.param(1, {"cpu": "5"}, 1, id="replicas-below-limits"),
        pytest.param(3, {"nvidia.com/gpu": "1"}, 3, id="unrelated-limit-ignored"),
        pytest.param(None, None, 0, id="nothing-set"),
    ],
)
def test_buffer_replicas(
    replicas: int | None, limits: dict[str, str] | None, expected: int
) -> None:
    """Buffer chunks: replicas, capped by how many chunks fit in the limits."""
    chunk = b.pod("chunk", cpu="2", memory="1Gi")
    buf = buffers.Buffer("team", "web", chunk, replicas, res.parse(limits) if limits else None)
    pods = buffers.virtual_pods(buf)
    assert len(pods) == expected
    assert all(buffers.is_virtual(p) and p.namespace == "team" for p in pods)


def test_buffer_pods_launch_headroom_then_fit_it() -> None:
    """A pass with a buffer's virtual pods launches room for them; once a node with that room
    exists, the same virtual pods fit it and nothing more is launched."""
    buf = buffers.Buffer("default", "web", b.pod("chunk", cpu="1"), 3)
    first = solve(b.cluster(), list(buffers.virtual_pods(buf)), Options())
    assert len(first.new_claims) == 1 and len(first.new_claims[0].pods) == 3
    node = b.node("headroom", cpu="4")
    second = solve(b.cluster(nodes=(node,)), list(buffers.virtual_pods(buf)), Options())
    assert not second.new_claims and second.existing[0][0] == "headroom"
