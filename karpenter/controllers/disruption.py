"""The disruption controller: decide with the core, hand each command to the disruption queue.

Every ``poll_s`` the leader takes a snapshot and asks the pure core (``planner.decide``, the
same code as ``karpenter simulate --disruption``) for the next command, leaving out the nodes the
queue holds (in flight, or backing off after a failed command). Emptiness and consolidation
commands are validated first, as upstream does: wait ``validation_s``, then judge the command's own
candidates again on a fresh snapshot (``core/disruption/validation.py``); the command goes ahead
if they are still candidates within budget and give the same kind of command (a fresh decision
would name other candidates whenever anything moved the ranking during the wait). The queue
(``controllers/disruption_queue.py``) then records, marks and replaces, and finishes each
command when its replacements are up, so several commands are in flight at once; nodes of
in-flight commands carry the disrupted taint, which the core reads as in flight (not candidates,
counted against budgets, their pods rescheduled in every what-if).

Unlike upstream, one wait serves a round of commands: a command waiting out its validation holds
its nodes as a started one does, and its pods are where it moves them, its replacements present
(``validation.as_started``), so the next decision, which follows at once, sees only the room the
command leaves, until a pass finds nothing more (or the round's first command has waited a whole
``validation_s``). Then every command of the round is judged again in decision order, with the
ones before it that still hold marked, and those that hold start together. Upstream's
single-node consolidation spends one wait per node it removes; here a round takes as many nodes
as the budgets allow, each command judged with every command decided before it counted as
moving.

The decision runs in a worker thread, so the event loop (watches, probes, Lease renewals) keeps
running during a long pass, and each consolidation search has a time budget (upstream's: one
minute for multi-node, three for single-node) read off the injected clock: past it, multi-node
acts on the largest set it proved and single-node on none, and the next pass's single-node walk
judges first the candidates this one did not reach (``core/disruption/bound.py``).

Emptiness and consolidation wait while pods are on the move (``settling``): pods still on a
draining node, or created moments ago and not yet judged by the kube-scheduler. The scheduler
places them by its own scoring, on the least-allocated nodes (the very candidates a decision
taken meanwhile would pick), so such decisions mostly failed their validation a whole wait
later. The hold lasts at most ``settle_max_s`` per stretch of motion (then passes decide as
before until nothing moves), so a blocked drain or steady churn cannot starve consolidation;
expiration and drift never wait.

Expiration deletes at once (no budgets, no pre-launched replacement), as upstream's expiration
controller does; the provisioner finds capacity for the evicted pods.

Re-plans (not upstream: repacks, and splits into several replacements) are held by a ratchet
(``core/disruption/ratchet.py``): they are offered to the core only while the fleet costs less
than when the last started re-plan was decided, so a re-plan whose evicted pods bought nodes as
dear as its saving is not repeated on the same fleet.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import anyio.to_thread

from karpenter.aio import allocator
from karpenter.aio.clock import Clock
from karpenter.controllers import budget_metrics
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.controllers.disruption_queue import (
    CONSOLIDATION_TYPE,
    REPLACEMENT_TIMEOUT_S,
    DisruptionQueue,
)
from karpenter.controllers.launching import instance_types
from karpenter.core.disruption.bound import MULTI, SINGLE, Resume
from karpenter.core.disruption.candidates import SurveyMemo
from karpenter.core.disruption.commands import METHOD_EXPIRATION, Command
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.disruption.planner import decide, fleet_price
from karpenter.core.disruption.ratchet import (
    RepackRatchet,
    may_replan,
    replans,
    without_replans,
)
from karpenter.core.disruption.validation import VALIDATED, as_started, judge_again
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.provisioning.build import Reuse
from karpenter.kube import errors

POLL_S = 10.0
VALIDATION_S = 15.0
SYNC_RETRY_S = 1.0  # upstream requeues the disruption singleton in 1 s until synced
QUIET_REFRESH_S = 60.0
MULTI_BUDGET_S = 60.0  # upstream's multi-node consolidation timeout
SINGLE_BUDGET_S = 180.0  # upstream's single-node consolidation timeout
SETTLE_MAX_S = 20.0  # longest stretch emptiness and consolidation wait for pods on the move
SETTLE_RECENT_S = 10.0  # an unjudged pod younger than this is on its way to a node


class ClockBound:
    """A consolidation search's time budget on ``clock`` (``core.disruption.bound.Bound``).

    Read from the worker thread the decision runs in; the clock is only read, never slept on.
    """

    def __init__(self, clock: Clock, multi_s: float, single_s: float) -> None:
        self._clock = clock
        self._seconds = {MULTI: multi_s, SINGLE: single_s}
        self._deadline = float("inf")

    def begin(self, method: str) -> None:
        """``method``'s search starts now: its budget counts from here."""
        self._deadline = self._clock.now() + self._seconds[method]

    def over(self) -> bool:
        """True once the running search's budget has elapsed."""
        return self._clock.now() >= self._deadline


class Disruption(Controller):
    """Decides with the core and hands commands to the disruption queue (leader only)."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        poll_s: float = POLL_S,
        validation_s: float = VALIDATION_S,
        replacement_timeout_s: float = REPLACEMENT_TIMEOUT_S,
        quiet_refresh_s: float = QUIET_REFRESH_S,
        multi_budget_s: float = MULTI_BUDGET_S,
        single_budget_s: float = SINGLE_BUDGET_S,
        settle_max_s: float = SETTLE_MAX_S,
    ) -> None:
        super().__init__(ctx, "disruption")
        self.poll_s = poll_s
        self.validation_s = validation_s
        self.queue = DisruptionQueue(ctx, replacement_timeout_s=replacement_timeout_s)
        self.quiet_refresh_s = quiet_refresh_s
        self._quiet: tuple[int, float] | None = None  # (state version, when) of a quiet pass
        self._reuse = Reuse()
        self._memo = SurveyMemo()
        self._budgets = (multi_budget_s, single_budget_s)
        self._resume = Resume()  # where a cut-short single-node walk goes on
        self.unsynced = False  # the last pass waited for the mirror (retried in a second)
        self.settling = False  # the last pass left consolidation out: pods on the move
        self.settle_max_s = settle_max_s
        self._settling_since: float | None = None  # start of the current motion
        self.validating: list[Command] = []  # this round's commands, in decision order
        self._round = (0.0, 0.0)  # when the round's first and last commands were decided
        self.ratchet = RepackRatchet()  # re-plans only from a fleet cheaper than the last one
        self._replan_prices: dict[tuple[str, ...], float] = {}  # a re-plan's fleet at decision
        self._replans_held = False  # the ratchet held re-plans on the last pass (logged once)

    @property
    def executed(self) -> list[Command]:
        """Commands carried out to the end, oldest first (logs and tests)."""
        return [c.command for c in self.queue.executed if c.command is not None]

    async def run(self) -> None:
        """Decide forever while the queue carries commands out; a failed pass is logged and
        the next one starts afresh. A pass that started a command is followed by the next at
        once, as upstream requeues immediately: the started command's nodes are held, so the
        next pass looks at the rest (a drift of 300 nodes is not 300 polls of 10 s)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.queue.run)
            last: frozenset[str] = frozenset()
            while True:
                handed: Command | None = None
                carried = False
                try:
                    handed = await self.reconcile()
                    nothing_more = handed is None and not self.unsynced and not self.settling
                    if self.validating and (nothing_more or self._round_due()):
                        await self.carry_out()
                        carried = True
                except (errors.ApiError, OSError) as err:
                    self._log.warning("disruption pass failed", error=str(err))
                names = frozenset(handed.names) if handed is not None else frozenset()
                if carried or (names and names != last):
                    await anyio.lowlevel.checkpoint()
                elif self.unsynced or self.settling:
                    # upstream requeues in a second while the cluster is not synced (a launch
                    # in flight): the command that launched it must not cost the next a poll;
                    # likewise pods landing take seconds, not a poll
                    await self.clock.sleep(min(self.poll_s, SYNC_RETRY_S))
                else:
                    # nothing started, or the very same nodes again (a command that changed
                    # nothing must not spin the loop): wait for the next poll
                    await self.clock.sleep(self.poll_s)
                last = names

    async def status(self) -> dict[str, object]:
        """What holds this controller back now (a stalled scale-down explained): whether the
        mirror is synced, the round waiting out its validation, commands in flight, held
        nodes, and what a plain pass on a fresh snapshot (no memos, no time budget) would do
        and why it leaves each blocked node alone."""
        cluster, now = await self._snapshot(self.validating)
        held = self.queue.held()

        def run() -> tuple[Command | None, DisruptionPass, bool]:
            options, _, allowed = self._gate(cluster, now)
            command, ps = decide(cluster, options, now, held=held)
            return command, ps, allowed

        command, ps, allowed = await anyio.to_thread.run_sync(run)
        return {
            "synced": self.state.synced(),
            "adopted": self.queue.adopted,
            "quiet": self._quiet is not None,
            "settling": self.settling,
            "validating": [list(c.names) for c in self.validating],
            "in_flight": {i: sorted(c.candidates.values()) for i, c in self.queue.inflight.items()},
            "held": held,
            "replans_held": not allowed,
            "would_decide": None if command is None else [command.method, list(command.names)],
            "blocked": [f"{b.name}: {b.reason}" for b in ps.notes],
        }

    def _round_due(self) -> bool:
        """The round has been gathering commands for a whole validation wait: its first
        command waits no longer for the others."""
        return self.clock.now() - self._round[0] >= self.validation_s

    async def _snapshot(self, marked: Sequence[Command]) -> tuple[Cluster, float]:
        """The cluster now, as it will be once the ``marked`` commands in their validation wait
        have started (``validation.as_started``: nodes in flight, pods where the commands move
        them, replacements joining): all of the round for a decision, the ones decided before
        it that still hold when a waiting command is judged again. A later command was decided
        with this one's pods where this one moves them, so it takes care of their room; were its
        pods counted here as well, this one could fail against a packing order, not the room."""
        pools = self.state.active_nodepools()
        types = await instance_types(
            self.cloud, self.state, pools, self.clock.now(), self.options, self._log
        )
        now = self.clock.now()
        return as_started(self.state.snapshot(types, now), marked, now), now

    def _settle(self, now: float) -> bool:
        """Whether this pass leaves emptiness and consolidation out: pods are on the move, and
        have been for less than ``settle_max_s``. Past it (a drain blocked by a PDB, a pod the
        scheduler never judges) passes decide as usual until nothing is on the move once."""
        if not self.state.pods_in_motion(now, SETTLE_RECENT_S):
            self._settling_since = None
            return False
        if self._settling_since is None:
            self._settling_since = now
        return now - self._settling_since < self.settle_max_s

    def _gate(self, cluster: Cluster, now: float) -> tuple[Options, float | None, bool]:
        """The configured options a decision on ``cluster`` runs with, re-plans (repacks,
        splits) left out while the ratchet holds them. Also the fleet's price when it had to be
        read, and whether re-plans are allowed.

        Called in the decision's worker thread, and it prices the fleet only while the ratchet
        holds: pricing 10,000 nodes takes 150 ms, on the event loop a stalled watch. The price is
        the fleet as it will be: a started command's candidates, still present beside their
        replacements until these are up, would make every fleet look dearer for a while."""
        options = self.options
        if not (may_replan(options) and self.ratchet.holding(now)):
            return options, None, True
        price = fleet_price(cluster, staying=True)
        if self.ratchet.allows(price, now):
            return options, price, True
        return without_replans(options), price, False

    async def _decide(self) -> Command | None:
        cluster, now = await self._snapshot(self.validating)
        settling = self.settling
        held = self.queue.held()
        bound = ClockBound(self.clock, *self._budgets)

        def run() -> tuple[Command | None, DisruptionPass, float | None, bool]:
            allocator.trim()  # the last pass's garbage, freed by now, back to the OS
            options, price, allowed = self._gate(cluster, now)
            command, ps = decide(
                cluster,
                options,
                now,
                reuse=self._reuse,
                survey_memo=self._memo,
                held=held,
                bound=bound,
                resume=self._resume,
                settling=settling,
            )
            if price is None and command is not None and replans(command):
                price = fleet_price(cluster, staying=True)
            return command, ps, price, allowed

        command, ps, price, allowed = await anyio.to_thread.run_sync(run)
        if not allowed and not self._replans_held:
            self._log.info(
                "repack held: the fleet costs no less than when the last re-plan started"
                " (repacks and splits into several replacements wait)",
                price_per_hour=round(price or 0.0, 4),
                last_repack_price_per_hour=round(self.ratchet.price, 4),
            )
        self._replans_held = not allowed
        budget_metrics.publish(self.metrics, ps)
        for method in ps.timeouts:
            self._log.info("consolidation search cut short by its time budget", method=method)
            self.metrics.voluntary_disruption_consolidation_timeouts.labels(
                consolidation_type=method
            ).inc()
        if command is not None and replans(command) and price is not None:
            self._replan_prices[command.names] = price
        return command

    async def _revalidate(self, command: Command, earlier: Sequence[Command]) -> Command | str:
        """``command`` judged again on a fresh snapshot (``core.disruption.validation``), the
        ``earlier`` commands of its round that still hold marked; or why it no longer holds."""
        cluster, now = await self._snapshot(earlier)
        held = self.queue.held()

        def run() -> Command | str:
            return judge_again(
                cluster,
                self.options,
                now,
                command,
                reuse=self._reuse,
                survey_memo=self._memo,
                held=held,
            )

        return await anyio.to_thread.run_sync(run)

    async def reconcile(self) -> Command | None:
        """One pass: the command started, or added to the round waiting out its validation, or
        None."""
        self.unsynced = not (
            self.state.synced() and self.queue.adopted and self.state.virtual_pods.warm
        )
        if self.unsynced:
            # a launch in flight changes what fits where, a previous leader's commands must be
            # back in the queue and the CapacityBuffers resolved before anything new is decided
            return None
        now = self.clock.now()
        if self._quiet is not None:
            version, since = self._quiet
            # Nothing changed since a pass found nothing: skip, but look again now and then
            # for what time alone changes (consolidateAfter elapsing, budget windows, expiry).
            if version == self.state.version and now - since < self.quiet_refresh_s:
                return None
        version = self.state.version
        self.settling = self._settle(now)
        command = await self._decide()
        if command is None:
            if not self.settling:  # a settling pass did not ask consolidation: not quiet
                self._quiet = (version, now)
            return None
        self._quiet = None
        if command.method not in VALIDATED:
            return command if await self._start(command) else None
        self.validating.append(command)
        first = self._round[0] if len(self.validating) > 1 else now
        self._round = (first, self.clock.now())
        return command

    async def carry_out(self) -> list[Command]:
        """The round's end: once its last command was decided ``validation_s`` ago, judge every
        command again in decision order (with the ones before it that still hold marked) and
        start those that hold, all judged before any starts. A started command's replacements
        join the cluster uninitialized, and a command judged after that would be refused for
        pods that would land on them, though it was decided (and is sound) without them."""
        holding: list[Command] = []
        try:
            wait = self._round[1] + self.validation_s - self.clock.now()
            if wait > 0:
                await self.clock.sleep(wait)
            synced = await self._synced_within(self.validation_s)
            for command in self.validating:
                again = (
                    await self._revalidate(command, holding)
                    if synced
                    else "Unsynced: launches stayed in flight through the wait"
                )
                if isinstance(again, str):
                    self._invalid(command, again)
                else:
                    holding.append(again)
        finally:
            # whatever happens, the round is over: a dropped command's nodes are candidates
            # again, and a pass that found nothing while they were marked must not be trusted
            self.validating.clear()
            self._quiet = None
            prices, self._replan_prices = self._replan_prices, {}
        started = [command for command in holding if await self._start(command)]
        for command in started:  # decision order: the last re-plan saw the cheapest fleet
            if replans(command) and command.names in prices:
                self.ratchet.started(prices[command.names], self.clock.now())
        return started

    async def _synced_within(self, seconds: float) -> bool:
        """Wait (a second at a time, as upstream requeues) for the mirror to hold every launch
        in flight: a command is judged on a synced cluster or not at all."""
        deadline = self.clock.now() + seconds
        while not self.state.synced():
            if self.clock.now() >= deadline:
                return False
            await self.clock.sleep(SYNC_RETRY_S)
        return True

    def _invalid(self, command: Command, why: str) -> None:
        self._log.info(
            "disruption command no longer valid after the validation wait",
            reason=command.reason,
            method=command.method,
            nodes=list(command.names),
            why=why,
        )
        self.metrics.voluntary_disruption_validation_failures.labels(
            consolidation_type=CONSOLIDATION_TYPE[command.method]
        ).inc()

    async def _start(self, command: Command) -> bool:
        if command.method == METHOD_EXPIRATION:
            await self.queue.expire(command)
            return True
        try:
            started = await self.queue.start(command) is not None
        except (errors.ApiError, OSError) as err:
            self._log.warning("disruption command could not start", error=str(err))
            return False
        if not started:
            self._log.info(
                "disruption command could not start",
                reason=command.reason,
                method=command.method,
                nodes=list(command.names),
            )
        return started
