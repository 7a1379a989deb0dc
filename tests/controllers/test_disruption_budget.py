"""The controller's disruption pass runs off the event loop and stops at its time budget.

The decision runs in a worker thread (as ``Disruption._decide`` runs it) with the controller's
``ClockBound`` on a fake clock. Before every judgement the pass asks the event loop to move the
clock on by ten seconds (``anyio.from_thread``): had the pass held the loop, no judgement could
happen at all. The budget is then checked by counting: a 30 s single-node budget allows exactly
the judgements made before 30 s of (fake) time elapsed.
"""

from __future__ import annotations

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from bench.disruption import NOW
from karpenter.aio.clock import FakeClock
from karpenter.controllers.disruption import ClockBound
from karpenter.core.disruption.bound import MULTI, SINGLE, Resume
from karpenter.core.disruption.commands import METHOD_SINGLE, Command
from karpenter.core.disruption.planner import decide
from karpenter.core.model.cluster import Cluster, Options
from tests.core.test_disruption_bound import plan_snapshots

STEP_S = 10.0


class LoopTicks:
    """A bound whose every check first has the event loop advance the clock by ``STEP_S``."""

    def __init__(self, inner: ClockBound, clock: FakeClock) -> None:
        self.inner, self.clock = inner, clock
        self.ticks: list[str] = []
        self._method = ""

    def begin(self, method: str) -> None:
        self._method = method
        self.inner.begin(method)

    def over(self) -> bool:
        anyio.from_thread.run_sync(self.clock.advance, STEP_S)  # runs on the event loop
        self.ticks.append(self._method)
        return self.inner.over()


async def _pass(
    cluster: Cluster, clock: FakeClock, bound: LoopTicks, resume: Resume
) -> tuple[Command | None, list[str]]:
    def run() -> tuple[Command | None, list[str]]:
        command, ps = decide(
            cluster,
            Options(),
            NOW,
            assume_consolidate_after_elapsed=True,
            bound=bound,
            resume=resume,
        )
        return command, ps.timeouts

    with anyio.fail_after(120):
        return await anyio.to_thread.run_sync(run)


def _long_walk() -> Cluster:
    walks = [s for s in plan_snapshots() if s.command.method == METHOD_SINGLE and s.single >= 5]
    assert walks, "no pass of the plans judges five candidates before its single-node command"
    return walks[0].cluster


@pytest.mark.asyncio
async def test_single_node_pass_stops_at_its_time_budget_while_the_loop_runs() -> None:
    """With a 30 s single-node budget and 10 s passing per judgement (moved by the event loop
    while the pass runs in its thread), the walk judges two candidates, acts on none, and the
    next pass starts with the candidates it did not reach."""
    cluster = _long_walk()
    clock = FakeClock(NOW)
    bound = LoopTicks(ClockBound(clock, multi_s=60.0, single_s=30.0), clock)
    resume = Resume()
    command, timeouts = await _pass(cluster, clock, bound, resume)
    assert command is None
    assert timeouts == [SINGLE]
    # the 3rd check sees 30 s elapsed: two judgements made, the third refused
    assert bound.ticks.count(SINGLE) == 3
    assert len(resume.judged) == 2
    assert clock.now() == NOW + STEP_S * len(bound.ticks)


@pytest.mark.asyncio
async def test_multi_node_search_stops_at_its_time_budget() -> None:
    """A 15 s multi-node budget lets the binary search make one judgement before acting on
    what it has; the controller's pass says which search was cut short."""
    cluster = plan_snapshots()[0].cluster  # a pass whose multi-node search takes 3 steps
    clock = FakeClock(NOW)
    bound = LoopTicks(ClockBound(clock, multi_s=15.0, single_s=30.0), clock)
    _, timeouts = await _pass(cluster, clock, bound, Resume())
    assert MULTI in timeouts
    assert bound.ticks.count(MULTI) == 2  # one judgement allowed, the second check refused
