"""The repack ratchet: a repack starts only from a fleet cheaper than the last one started from.

The controller's wiring is checked with the decision itself replaced (the core's repack has its
own tests in tests/core/test_disruption_repack.py): what matters here is which options the
controller hands the core, given the fleet price it sees and the repacks it started.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from karpenter.aio.clock import FakeClock
from karpenter.controllers import budget_metrics
from karpenter.controllers import disruption as module
from karpenter.controllers.disruption import Disruption
from karpenter.core.disruption.commands import (
    METHOD_DRIFT,
    METHOD_MULTI,
    METHOD_REPACK,
    METHOD_SINGLE,
    Command,
)
from karpenter.core.disruption.ratchet import HOLD_S, RepackRatchet
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.nodepool import REASON_UNDERUTILIZED
from karpenter.core.provisioning.results import NewNodeClaim
from karpenter.kube.client import KubeClient
from karpenter.state.cluster import ClusterState
from tests.support.context import controller_context

NOW = 1_767_225_700.0


def test_ratchet_allows_only_a_cheaper_fleet_until_it_lapses() -> None:
    """Never started: any fleet. After a repack decided at 10 $/h: not at 10 or above, yes
    below; after HOLD_S, any fleet again."""
    ratchet = RepackRatchet()
    assert not ratchet.holding(NOW)
    assert ratchet.allows(1e9, NOW)
    ratchet.started(10.0, NOW)
    assert ratchet.holding(NOW + HOLD_S - 1)
    assert not ratchet.holding(NOW + HOLD_S)
    assert not ratchet.allows(10.0, NOW + 1)
    assert not ratchet.allows(10.0 + 1e-9, NOW + 1)  # the same fleet, summed in another order
    assert not ratchet.allows(12.0, NOW + HOLD_S - 1)
    assert ratchet.allows(9.99, NOW + 1)
    assert ratchet.allows(12.0, NOW + HOLD_S)


class _Core:
    """Stands in for the snapshot, the fleet price and the decision; records the options."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, ctrl: Disruption) -> None:
        self.price = 0.0
        self.method = METHOD_REPACK
        self.replacements = 0  # how many replacements the decided command launches
        self.options: list[Options] = []

        async def snapshot(marked: Any) -> tuple[Cluster, float]:
            return Cluster(), ctrl.clock.now()

        def decide(cluster: Cluster, options: Options, now: float, **_: Any) -> Any:
            self.options.append(options)
            launches = cast("tuple[NewNodeClaim, ...]", (object(),) * self.replacements)
            command = Command(REASON_UNDERUTILIZED, self.method, (), launches)
            return command, SimpleNamespace(timeouts=(), notes=())

        async def revalidate(command: Command, earlier: Any) -> Command:
            return command

        async def start(command: Command) -> bool:
            return True

        monkeypatch.setattr(ctrl, "_snapshot", snapshot)
        monkeypatch.setattr(ctrl, "_revalidate", revalidate)
        monkeypatch.setattr(ctrl, "_start", start)
        monkeypatch.setattr(module, "decide", decide)
        monkeypatch.setattr(module, "fleet_price", lambda cluster, staying: self.price)
        monkeypatch.setattr(budget_metrics, "publish", lambda metrics, ps: None)

    async def round(self, ctrl: Disruption, price: float) -> bool:
        """One decision at ``price`` carried out at once; whether repack was offered."""
        self.price = price
        command = await ctrl._decide()
        assert command is not None
        ctrl.validating.append(command)
        ctrl._round = (ctrl.clock.now() - 100, ctrl.clock.now() - 100)  # waited out
        await ctrl.carry_out()
        options = self.options[-1]
        if ctrl.options.repack_consolidation:  # re-plans are held together, or neither
            assert options.repack_consolidation == (options.max_replacements > 1)
        return options.repack_consolidation


def _controller() -> Disruption:
    clock = FakeClock(NOW)
    ctx = controller_context(
        cast("KubeClient", None),
        clock,
        state=ClusterState(),
        options=Options(repack_consolidation=True, max_replacements=10),
    )
    return Disruption(ctx)


@pytest.mark.asyncio
async def test_a_repack_that_did_not_pay_holds_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repack started on a 10 $/h fleet; stranded pods bought nodes and the fleet is back at
    10 $/h: the next decision is made without repack, and again until the fleet costs less
    (a single-node command brought it to 9.5) or HOLD_S has passed."""
    ctrl = _controller()
    core = _Core(monkeypatch, ctrl)
    clock = cast("FakeClock", ctrl.clock)
    assert await core.round(ctrl, 10.0)
    assert ctrl.ratchet.price == 10.0
    clock.advance(60)
    core.method = METHOD_SINGLE
    assert not await core.round(ctrl, 10.0)
    assert not await core.round(ctrl, 10.2)
    assert ctrl.ratchet.price == 10.0  # a single-node command moves nothing
    core.method = METHOD_REPACK
    assert await core.round(ctrl, 9.5)
    assert ctrl.ratchet.price == 9.5
    assert not await core.round(ctrl, 9.5)
    clock.advance(HOLD_S)
    assert await core.round(ctrl, 9.5)


@pytest.mark.asyncio
async def test_a_repack_that_failed_validation_holds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repack refused at its validation never started: the next decision may repack on the
    same fleet."""
    ctrl = _controller()
    core = _Core(monkeypatch, ctrl)

    async def refuse(command: Command, earlier: Any) -> str:
        return "NotCheaper: the repack no longer holds"

    monkeypatch.setattr(ctrl, "_revalidate", refuse)
    assert await core.round(ctrl, 10.0)
    assert ctrl.ratchet.price == float("inf")
    assert await core.round(ctrl, 10.0)


@pytest.mark.asyncio
async def test_repack_off_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the gate off the ratchet never turns repack on."""
    ctrl = _controller()
    ctrl.options = Options(repack_consolidation=False)
    core = _Core(monkeypatch, ctrl)
    core.method = METHOD_SINGLE
    assert not await core.round(ctrl, 10.0)
    assert ctrl.ratchet.price == float("inf")


@pytest.mark.asyncio
async def test_the_status_view_decides_as_the_controller_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`status()` (what holds scale-down back) decides with the options the controller would
    use: while the ratchet holds repack it says so and offers no repack to the core."""
    ctrl = _controller()
    core = _Core(monkeypatch, ctrl)
    view = await ctrl.status()
    assert view["replans_held"] is False
    assert core.options[-1].repack_consolidation
    assert await core.round(ctrl, 10.0)
    cast("FakeClock", ctrl.clock).advance(60)
    core.price = 10.0
    view = await ctrl.status()
    assert view["replans_held"] is True
    assert not core.options[-1].repack_consolidation
    core.price = 9.0
    assert (await ctrl.status())["replans_held"] is False
    assert core.options[-1].repack_consolidation


@pytest.mark.asyncio
async def test_a_split_that_did_not_pay_holds_the_next_replan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A consolidation split into two replacements is a re-plan: started on a 10 $/h fleet that
    is back at 10 $/h, the next decision gets neither splits nor repack. A drift's two forced
    replacements, or a one-for-one replacement, record nothing."""
    ctrl = _controller()
    core = _Core(monkeypatch, ctrl)
    core.method, core.replacements = METHOD_DRIFT, 2
    assert await core.round(ctrl, 10.0)
    core.method, core.replacements = METHOD_SINGLE, 1
    assert await core.round(ctrl, 10.0)
    assert ctrl.ratchet.price == float("inf")
    core.method, core.replacements = METHOD_MULTI, 2
    assert await core.round(ctrl, 10.0)
    assert ctrl.ratchet.price == 10.0
    cast("FakeClock", ctrl.clock).advance(60)
    assert not await core.round(ctrl, 10.0)
    assert core.options[-1].max_replacements == 1
    assert await core.round(ctrl, 9.0)
    assert core.options[-1].max_replacements == 10
