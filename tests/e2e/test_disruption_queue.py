"""The disruption queue on a real control plane: commands in flight together, rolled back when a
replacement fails, and carried on by a restarted controller."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from karpenter.cloud.provider import InsufficientCapacityError, OfferingRef
from karpenter.controllers.disruption_marks import (
    COMMAND_ANNOTATION,
    DISRUPTED_TAINT,
    DISRUPTION_REASON,
    REPLACEMENT_ANNOTATION,
    InFlight,
)
from karpenter.core.model import labels as lbl
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.operator import Operator
from karpenter.providers.simulated.cloud import SimulatedCloud
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e

FAST = (0.5, 1.0)  # poll, validation wait
AGENT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
ON_DEMAND = [{"key": lbl.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]


def _pool(name: str, *, startup: bool = True) -> dict[str, Any]:
    body = harness.nodepool(name, ON_DEMAND)
    body["spec"]["disruption"] = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }
    if startup:  # nodes stay uninitialized until the test plays the node agent
        body["spec"]["template"]["spec"]["startupTaints"] = [AGENT]
    return body


def _deployment(name: str, pool: str, replicas: int) -> dict[str, Any]:
    template = harness.pod("x", pool, cpu="1")
    template["metadata"] = {"labels": {"app": name}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template,
        },
    }


async def _agent_ready(kube: kc.KubeClient, pool: str) -> list[str]:
    """Remove the startup taint from every Node of ``pool`` that still has it."""
    nodes, _ = await kube.list(kc.NODES, label_selector=f"{lbl.NODEPOOL}={pool}")
    done = []
    for node in nodes:
        taints = codec.taints_of(node)
        kept = [t for t in taints if not codec.same_taint(t, AGENT)]
        if kept != taints:
            rv = codec.meta(node).get("resourceVersion")
            patch = {"metadata": {"resourceVersion": rv}, "spec": {"taints": kept}}
            try:
                await kube.merge_patch(kc.NODES, codec.name(node), patch)
            except errors.Conflict:
                continue
            done.append(codec.name(node))
    return done


async def _live(kube: kc.KubeClient, pool: str) -> list[dict[str, Any]]:
    return [
        c for c in await harness.claims_of(kube, pool) if not codec.meta(c).get("deletionTimestamp")
    ]


async def _settled(kube: kc.KubeClient, pool: str, ns: str, pods: int) -> dict[str, Any] | None:
    """The pool's single live claim once its node is up and ``pods`` replicas run there."""
    await _agent_ready(kube, pool)
    claims = await _live(kube, pool)
    if len(claims) != 1 or not codec.condition_true(claims[0], "Initialized"):
        return None
    listed, _ = await kube.list(kc.PODS, ns)
    live = [p for p in listed if not codec.meta(p).get("deletionTimestamp")]
    if len(live) != pods or not all(p["spec"].get("nodeName") for p in live):
        return None
    return claims[0]


def _tainted(node: dict[str, Any]) -> bool:
    return any(codec.same_taint(t, DISRUPTED_TAINT) for t in codec.taints_of(node))


async def _in_flight(kube: kc.KubeClient, pool: str) -> tuple[str, str] | None:
    """(candidate claim, replacement claim) of a command started on ``pool``."""
    claims = await _live(kube, pool)
    marked = [c for c in claims if COMMAND_ANNOTATION in (codec.meta(c).get("annotations") or {})]
    made = [c for c in claims if REPLACEMENT_ANNOTATION in (codec.meta(c).get("annotations") or {})]
    if len(marked) != 1 or len(made) != 1:
        return None
    return codec.name(marked[0]), codec.name(made[0])


async def _start_replace(op: Operator, kube: kc.KubeClient, pool: str, ns: str) -> dict[str, Any]:
    await kube.create(kc.NODEPOOLS, _pool(pool))
    await kube.create(kc.DEPLOYMENTS, _deployment("api", pool, 2), ns)
    first = await harness.eventually(lambda: _settled(kube, pool, ns, 2), "two replicas up")
    await kube.merge_patch(kc.DEPLOYMENTS, "api", {"spec": {"replicas": 1}}, ns)
    return first  # type: ignore[no-any-return]


@pytest.mark.asyncio
async def test_restart_mid_command_carries_on(control_plane: ControlPlane) -> None:
    """A controller stopped while a replacement boots leaves the command in the cluster; the next
    one adopts it (no second replacement), waits for the replacement and deletes the candidate."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        pool = harness.unique("restart")
        ns = await harness.namespace(kube)
        async with harness.running(
            control_plane.kubeconfig, disruption_timing=FAST, agent_delay_s=None
        ) as op:
            first = await _start_replace(op, kube, pool, ns)
            pair = await harness.eventually(
                lambda: _in_flight(kube, pool), "a replace command in flight", wait_s=60
            )
            candidate, replacement = pair
            assert candidate == codec.name(first)
        # controller gone mid-command: the record is in the cluster, the candidate still tainted
        raw = await kube.get(kc.NODECLAIMS, candidate)
        assert COMMAND_ANNOTATION in codec.meta(raw)["annotations"]
        assert codec.condition_true(raw, DISRUPTION_REASON)
        assert _tainted(await kube.get(kc.NODES, raw["status"]["nodeName"]))
        async with harness.running(
            control_plane.kubeconfig, disruption_timing=FAST, agent_delay_s=None
        ) as again:
            queue = again.disruption.queue

            async def adopted() -> bool:
                return queue.adopted and any(
                    candidate in cmd.candidates for cmd in queue.inflight.values()
                )

            await harness.eventually(adopted, "the command adopted by the new controller")
            assert await _in_flight(kube, pool) == (candidate, replacement)

            async def done() -> bool:
                claims = await _settled(kube, pool, ns, 1)
                return claims is not None and codec.name(claims) == replacement

            await harness.eventually(done, "the candidate replaced", wait_s=90)
            assert [c.candidates for c in queue.executed] == [
                {candidate: raw["status"]["nodeName"]}
            ]
            assert {codec.name(c) for c in await _live(kube, pool)} == {replacement}
            await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_failed_replacement_rolls_back_with_backoff(control_plane: ControlPlane) -> None:
    """A replacement whose launch fails rolls its command back: taint off, record and condition
    cleared, and the node held back from the next decisions."""
    async with (
        harness.running(control_plane.kubeconfig, disruption_timing=FAST, agent_delay_s=None) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pool = harness.unique("rollback")
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, _pool(pool, startup=False))
        await kube.create(kc.DEPLOYMENTS, _deployment("api", pool, 2), ns)
        first = await harness.eventually(lambda: _settled(kube, pool, ns, 2), "two replicas up")
        name = codec.name(first)
        node = first["status"]["nodeName"]
        refused = OfferingRef("fake-it-1", "test-zone-1", "on-demand")
        op_cloud = op.cloud
        assert isinstance(op_cloud, SimulatedCloud)
        op_cloud.inject_create_errors(
            *(InsufficientCapacityError("no capacity", (refused,)) for _ in range(5)),
            nodepool=pool,
        )
        await kube.merge_patch(kc.DEPLOYMENTS, "api", {"spec": {"replicas": 1}}, ns)
        queue = op.disruption.queue

        async def rolled_back() -> bool:
            return any(name in cmd.candidates for cmd in queue.failed)

        await harness.eventually(rolled_back, "the command rolled back", wait_s=60)
        raw = await kube.get(kc.NODECLAIMS, name)
        assert COMMAND_ANNOTATION not in (codec.meta(raw).get("annotations") or {})
        assert codec.condition(raw, DISRUPTION_REASON) is None
        assert not _tainted(await kube.get(kc.NODES, node))
        assert node in queue.held()
        text = op.metrics.render().decode()
        assert (
            'karpenter_voluntary_disruption_queue_failures_total{consolidation_type="single"'
            in text
        )
        await harness.cleanup(kube, pool, ns)


async def _two_pools_down_to_one(
    kube: kc.KubeClient, *prefixes: str
) -> tuple[list[str], list[str]]:
    """A pool per prefix, each with two replicas on one node, then each Deployment scaled to
    one: each pool's node is left underused (a single-node replacement each)."""
    pools = [harness.unique(p) for p in prefixes]
    spaces = [await harness.namespace(kube) for _ in prefixes]
    for pool, ns in zip(pools, spaces, strict=True):
        await kube.create(kc.NODEPOOLS, _pool(pool))
        await kube.create(kc.DEPLOYMENTS, _deployment("api", pool, 2), ns)
    for pool, ns in zip(pools, spaces, strict=True):
        await harness.eventually(partial(_settled, kube, pool, ns, 2), "replicas up")
    for ns in spaces:
        await kube.merge_patch(kc.DEPLOYMENTS, "api", {"spec": {"replicas": 1}}, ns)
    return pools, spaces


@pytest.mark.asyncio
async def test_commands_of_two_pools_in_flight_together(control_plane: ControlPlane) -> None:
    """While one command waits for its replacement, the next decision starts another."""
    # One replacement per command (upstream's rule): with the cost pass's splits, multi-node
    # consolidation would take both pools' nodes in one command with two replacements.
    async with (
        harness.running(
            control_plane.kubeconfig,
            disruption_timing=FAST,
            agent_delay_s=None,  # the test plays the node agent (``_agent_ready``)
            CONSOLIDATION_MAX_REPLACEMENTS=1,
        ) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pools, spaces = await _two_pools_down_to_one(kube, "para", "parb")
        queue = op.disruption.queue

        async def both() -> bool:
            # in flight with their replacements made: before that a pool's one live claim is
            # still the candidate, which ``_settled`` would take for the replaced fleet
            commands = list(queue.inflight.values())
            return len(commands) == 2 and all(len(c.replacements) == c.expected for c in commands)

        await harness.eventually(both, "two commands in flight at once", wait_s=60)
        for pool, ns in zip(pools, spaces, strict=True):
            await harness.eventually(partial(_settled, kube, pool, ns, 1), "replaced", wait_s=90)

        async def finished() -> bool:
            return len(queue.executed) == 2 and not queue.inflight

        await harness.eventually(finished, "both commands finished")
        for pool, ns in zip(pools, spaces, strict=True):
            await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_commands_wait_out_their_validation_together(control_plane: ControlPlane) -> None:
    """The validation wait does not stop the deciding: while one pool's command waits, the
    next decision (the first command's nodes held as in flight) picks the other pool's, the
    two wait together and both start, each replacing its own pool's node."""
    async with (
        harness.running(
            control_plane.kubeconfig,
            disruption_timing=(0.5, 6.0),
            agent_delay_s=None,
            CONSOLIDATION_MAX_REPLACEMENTS=1,
        ) as op,
        kc.connect(control_plane.kubeconfig) as kube,
    ):
        pools, spaces = await _two_pools_down_to_one(kube, "vala", "valb")
        disruption = op.disruption

        async def waiting_together() -> list[str] | None:
            waiting = [n for c in disruption.validating for n in c.names]
            return waiting if len(disruption.validating) == 2 else None

        waiting = await harness.eventually(waiting_together, "two commands waiting", wait_s=60)
        assert len(set(waiting)) == 2  # each command its own node
        assert not disruption.queue.inflight  # neither started before its wait was over

        async def finished() -> bool:
            for pool in pools:  # play the node agent for the replacements
                await _agent_ready(kube, pool)
            return len(disruption.queue.executed) == 2 and not disruption.validating

        await harness.eventually(finished, "both commands carried out", wait_s=90)
        for pool, ns in zip(pools, spaces, strict=True):
            settled = await harness.eventually(partial(_settled, kube, pool, ns, 1), "replaced")
            assert codec.name(settled) not in waiting
            await harness.cleanup(kube, pool, ns)


@pytest.mark.asyncio
async def test_restart_rolls_back_an_unfinished_delete_only_command(
    control_plane: ControlPlane,
) -> None:
    """A delete-only command a previous leader recorded but did not finish is rolled back by
    the next leader, as upstream forgets it: taint off, record and condition cleared, the
    candidate kept, and neither counted as a failure nor backed off."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        pool = harness.unique("delonly")
        ns = await harness.namespace(kube)
        body = harness.nodepool(pool)  # consolidateAfter: Never, so nothing re-decides it
        await kube.create(kc.NODEPOOLS, body)
        await kube.create(kc.PODS, harness.pod("p", pool), ns)

        async def up() -> dict[str, Any] | None:
            claims = await _live(kube, pool)
            ok = len(claims) == 1 and codec.condition_true(claims[0], "Initialized")
            return claims[0] if ok else None

        async with harness.running(
            control_plane.kubeconfig, disruption_timing=FAST, agent_delay_s=None
        ) as op:
            claim = await harness.eventually(up, "the pool's node up")
            name, node = codec.name(claim), claim["status"]["nodeName"]
            # what a leader stopped between marking and deleting leaves behind
            crashed = InFlight("deadbeef0001", "Empty", "emptiness", "delete", {name: node}, 0, 0.0)
            await op.disruption.queue.marks.mark_claim(name, crashed)
            await op.disruption.queue.marks.taint(node, add=True)
        raw = await kube.get(kc.NODECLAIMS, name)
        assert codec.condition_true(raw, DISRUPTION_REASON)
        assert _tainted(await kube.get(kc.NODES, node))
        async with harness.running(
            control_plane.kubeconfig, disruption_timing=FAST, agent_delay_s=None
        ) as again:
            queue = again.disruption.queue
            await harness.eventually(lambda: _true(queue.adopted), "the queue adopted")
            # (other tests' commands may be adopted too: look at this one alone)
            assert [c.candidates for c in queue.rolled_back if c.id == "deadbeef0001"] == [
                {name: node}
            ]
            assert "deadbeef0001" not in queue.inflight
            assert not [c for c in queue.failed if c.id == "deadbeef0001"]
            assert node not in queue.held()
            raw = await kube.get(kc.NODECLAIMS, name)
            assert not codec.meta(raw).get("deletionTimestamp")
            assert COMMAND_ANNOTATION not in (codec.meta(raw).get("annotations") or {})
            assert codec.condition(raw, DISRUPTION_REASON) is None
            assert not _tainted(await kube.get(kc.NODES, node))
            failures = [
                line
                for line in again.metrics.render().decode().splitlines()
                if line.startswith("karpenter_voluntary_disruption_queue_failures_total{")
                and 'consolidation_type="empty"' in line
            ]
            assert not failures
            await harness.cleanup(kube, pool, ns)


async def _true(value: bool) -> bool:
    return value
