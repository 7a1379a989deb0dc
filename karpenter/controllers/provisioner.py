"""The provisioner: batch pending pods, solve on a snapshot, create the NodeClaims decided.

Triggers come from the state mirror (a pod became provisionable or its spec changed, a waiting
pod was bound off its plan (for the pods planned where it went), a NodeClaim went away, a
NodePool was created, deleted or its spec edited) and from a resync every 10 s
while pods stay provisionable (as upstream's pod trigger requeues), so pods whose claim failed
to launch are retried. Status rewrites are no trigger: a pod already provisionable (the
kube-scheduler rewriting its condition after each failed attempt, its verdict on a pod
provisioned early, a nomination written) or a NodePool's ``status.resources`` (rewritten as each
claim of a burst launches). Upstream triggers on every event; in a 1000-pod burst onto 500 nodes
that ran 23 passes which bought nothing, 0.3-1.4 s of CPU each, on the cores the apiserver and
the kube-scheduler needed. After a window closes the pass waits briefly (``SYNC_WAIT_S``) for
NodeClaims in flight to launch, but only when a pending pod has a topology constraint over
another key than the hostname (a zone spread needs the zone the claim launched in); otherwise a
claim still unlaunched counts what its smallest fitting type guarantees, and the pass goes ahead
at once.

Early provisioning (feature gate ``EarlyProvisioning``, on by default; not upstream): upstream
acts only on pods the kube-scheduler marked ``Unschedulable``. In a burst the scheduler's verdicts
trail the pods by seconds (a 1000-pod Deployment on a busy control plane: 7-10 s), and every one
of those seconds is a second before the first node boots. A pod the scheduler has not judged
``EARLY_AFTER_S`` after this controller first saw it (a healthy scheduler binds within
milliseconds) joins the pass as if judged: the pass places it on existing and in-flight capacity
first, exactly as it would an Unschedulable pod, so a pod that fits where the scheduler is about
to bind it buys nothing. Past ``EARLY_UNTIL_S`` without a verdict it waits for the scheduler
again: a scheduler that is down must not make Karpenter buy nodes for pods nobody will bind.
An open window whose idle gap has passed waits (within its max) for pods seen awaiting the
scheduler for ``HOLD_AFTER_S`` to fall due, so one pass covers a burst that arrives in waves,
and for the pods a ReplicaSet of the window has asked for and not created yet (``bursts``).
The idle gap counts from when each pod showed it was part of a burst (``HOLD_AFTER_S`` after it
was first seen), not from when it fell due: the window of a burst closes 1.25 s after its last
pod reached the mirror, as upstream's closes 1 s after the last verdict, instead of 2 s.

The pass takes the snapshot and the pending pods from the mirror in one synchronous step (no
await between them), runs the same pure ``solve`` as ``karpenter simulate`` in a worker
thread (the event loop keeps serving watches and leases), then creates the NodeClaims
concurrently and records each in the mirror at once, so the next pass counts it as capacity.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import aiohttp
import anyio
import anyio.abc
import anyio.to_thread

from karpenter.aio import allocator
from karpenter.aio.batcher import Batcher
from karpenter.aio.ratelimit import TokenBucket
from karpenter.cloud.provider import CloudProviderError
from karpenter.controllers.bursts import Bursts, kube_lookup
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.controllers.launching import create_nodeclaim, instance_types
from karpenter.controllers.nominations import NominationPublisher
from karpenter.controllers.spreadselectors import SpreadSelectors
from karpenter.core.buffers import is_virtual
from karpenter.core.model import labels as lbl
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod, TopologySpread
from karpenter.core.provisioning import lowerbound
from karpenter.core.provisioning.build import PassContext
from karpenter.core.provisioning.results import NewNodeClaim, Results
from karpenter.core.provisioning.scheduler import lower_bound, solve_pass
from karpenter.kube import codec, errors, events
from karpenter.kube.client import Obj
from karpenter.state.cluster import awaits_scheduler, is_provisionable

RESYNC_S = 10.0
HISTORY = 1000  # passes kept in ``passes``
HISTORY_KEYS = 20_000  # claims / pods kept in ``created_at`` / ``placed_at``
# How long a pass waits for in-flight launches. Short: a claim not launched yet is counted by
# what its smallest fitting type guarantees and its pods keep their nomination, so waiting only
# helps constraints that need the launched zone (zonal spread); under a slow apiserver a long
# wait holds up every pending pod.
SYNC_WAIT_S = 3.0
FAILED_SCHEDULING_DEDUPE_S = 300.0
# Nominated Events, across all pods: upstream's rate (5/s, burst 10). A 1000-pod burst would
# otherwise post 1000 Events (each an etcd write) while the apiserver, the kube-scheduler and
# the nodes' agents are busiest; the nomination itself is in the logs and the pod's status.
NOMINATED_EVENTS_QPS, NOMINATED_EVENTS_BURST = 5.0, 10
# Early provisioning: a pod the kube-scheduler has not judged this long after it was first seen
# is provisioned as if judged Unschedulable, until this long (then the scheduler's verdict again).
EARLY_AFTER_S = 1.0
EARLY_UNTIL_S = 60.0
EARLY_TICK_S = 0.25  # how often due pods are looked for
# A window whose idle gap has passed stays open for pods seen awaiting the scheduler at least
# this long and not due yet, until they fall due (bounded by the max window): a burst whose pods
# reach the mirror in waves was solved in two passes, buying more nodes than one pass over all
# of it. Younger pods do not hold it: a healthy scheduler binds them within milliseconds.
HOLD_AFTER_S = 0.25
# How often a window held for a ReplicaSet's pods still to come asks again (``bursts``).
BURST_HOLD_S = 0.25
_Event = tuple[Pod, str, str, str]  # pod, type, reason, message
# A pod's fields that its status alone changes: a pod equal but for these needs no new pass.
_STATUS_ONLY = frozenset(
    {
        "phase",
        "start_time",
        "unschedulable_condition",
        "awaiting_scheduler",
        "nominated_node_name",
        "ready",
    }
)
_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(Pod) if f.name not in _STATUS_ONLY)


def _same_spec(a: Pod, b: Pod) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in _SPEC_FIELDS)


@dataclass(frozen=True, slots=True)
class PassReport:
    """What one pass did (for logs, tests and the benchmark); ``waited`` says whether it
    waited for in-flight launches (a pending pod's topology needed them)."""

    pods: int
    created: tuple[str, ...]
    unschedulable: Mapping[str, str]
    waited: bool = False


def _arrived(since: float) -> float:
    """When a pod first seen awaiting the scheduler at ``since`` counts as arrived for the
    batch window: once it has awaited ``HOLD_AFTER_S`` (a burst's pod, not one about to be
    bound), not when it fell due a second after it was seen; a window otherwise closed 2 s
    after a burst's last pod."""
    return since + HOLD_AFTER_S


def _arrival_pattern(seen: Sequence[float]) -> dict[str, float | int]:
    """How the pods seen awaiting the scheduler since the last pass arrived: how many, over
    how long, and the longest pause between two of them (a window's idle gap shorter than
    that pause splits the burst into passes)."""
    if not seen:
        return {"arrivals": 0}
    times = sorted(seen)
    gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    return {
        "arrivals": len(times),
        "arrival_span_s": round(times[-1] - times[0], 3),
        "arrival_gap_s": round(gap, 3),
    }


def needs_launched_claims(pod: Pod) -> bool:
    """Whether placing ``pod`` beside an in-flight claim needs the claim's launched labels: a
    topology spread or pod (anti-)affinity over any key but the hostname (an unlaunched claim
    is its own host, but its zone or type is only known once launched)."""
    terms = (*pod.required_affinity, *pod.required_anti_affinity)
    weighted = (*pod.preferred_affinity, *pod.preferred_anti_affinity)
    keys = [s.topology_key for s in pod.topology_spread]
    keys += [t.topology_key for t in terms] + [w.term.topology_key for w in weighted]
    return any(key != lbl.HOSTNAME for key in keys)


class Provisioner(Controller):
    """The provisioning loop (a singleton: runs only on the leader)."""

    # Set by the composition root when CapacityBuffers are on: told after each pass where the
    # buffers' virtual pods went (the snapshot carries them; they are scheduled with the real
    # pending pods but never nominated or reported as pods).
    after_pass: Callable[[Results, Sequence[Pod]], Awaitable[None]] | None = None
    # Set by the composition root when PublishNominations is on: each pass tells it what it
    # saw pending (``nominations.hold_for``), which decides whether registrations publish.
    nominations: NominationPublisher | None = None

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        batch_idle_s: float,
        batch_max_s: float,
        default_spread: Sequence[TopologySpread] = (),
        early: bool = True,
    ) -> None:
        super().__init__(ctx, "provisioner")
        # SCHEDULER_CONFIG's default constraints, added to pods that declare none
        self.default_spread = tuple(default_spread)
        # How long a placement keeps its node from being disrupted (upstream: the longer of
        # twice the batch window and 10 s); every pass that places the pod again renews it.
        self.nomination_s = max(2 * batch_max_s, 10.0)
        self.batcher: Batcher[str] = Batcher(
            self.clock, batch_idle_s, batch_max_s, hold=self._held_until if early else None
        )
        # the window's ReplicaSets still short of their pods (read only while early is on)
        self.bursts = Bursts(self.state, self.clock, kube_lookup(self.kube))
        self.nominated_events = TokenBucket(
            self.clock, NOMINATED_EVENTS_QPS, NOMINATED_EVENTS_BURST
        )
        # Recent history for logs, tests and the latency benchmark, bounded: the controller
        # runs for months and must not grow with every pass, claim and pod it ever saw.
        self.passes: deque[PassReport] = deque(maxlen=HISTORY)
        self.created_at: dict[str, float] = {}
        # pod key → when the NodeClaim meant for it was created (latency measurements)
        self.placed_at: dict[str, float] = {}
        # pod key → the reason last logged for it (each pass sees every pending pod, so this
        # holds exactly the pods unschedulable in the last pass)
        self.unschedulable: dict[str, str] = {}
        # Early provisioning: pod key → when first seen awaiting the kube-scheduler's verdict,
        # and those not yet due, in the order seen (``_early_due`` pops them as they fall due).
        self.early = early
        self.awaiting: dict[str, float] = {}
        self._not_due: deque[tuple[float, str]] = deque()
        # when each pod seen since the last pass was first seen awaiting (for the pass log:
        # how a burst reached the mirror, which is what the batch window has to cover)
        self._arrivals: deque[float] = deque(maxlen=HISTORY_KEYS)
        # pod key → the pod as last triggered for (provisionable, or due early), until it binds
        # or goes: a status-only update (the scheduler's verdict on a pod provisioned early
        # included) triggers nothing (the resync still covers it every RESYNC_S)
        self._triggered: dict[str, Pod] = {}
        self._pool_generations: dict[str, object] = {}  # NodePool → the generation last seen
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "Pod":
            self._on_pod(key)
        elif kind == "NodeClaim" and obj is None:
            self.trigger_all()
        elif kind == "NodePool":
            # created, deleted or its spec edited (a generation), not its status: the NodePool
            # controller rewrites status.resources as every claim of a burst launches, and
            # each rewrite started a pass over every pending pod
            if obj is None:
                self._pool_generations.pop(key, None)
                self.trigger_all()
                return
            generation = codec.meta(obj).get("generation")
            if self._pool_generations.get(key) != generation:
                self._pool_generations[key] = generation
                self.trigger_all()

    def _on_pod(self, key: str) -> None:
        pod = self.state.pods.get(key)
        if pod is None or pod.node_name or not pod.is_active():
            was_waiting = self._triggered.pop(key, None) is not None
            if was_waiting and pod is not None and pod.node_name:
                self._bound(key, pod.node_name)
        elif is_provisionable(pod):
            before = self._triggered.get(key)
            self._triggered[key] = pod
            if before is None or not _same_spec(before, pod):
                since = self.awaiting.get(key)
                self.batcher.trigger(key, at=None if since is None else _arrived(since))
        if self.early:
            self._track_awaiting(key, pod)

    def _bound(self, key: str, node: str) -> None:
        """A waiting pod was bound to ``node``. Off its plan, it took room planned for the
        pending pods placed there: trigger them, so a pass finds them room (or a new node)
        now. The scheduler does not retry a pod it found no room for until a node comes or a
        pod goes, so room a pass merely expects them to find sits unused; without this the
        next resync (up to 10 s on) bought the node the last pods of a burst waited for.
        Only while nominations are published: otherwise the scheduler does not know the plan
        and binds nearly every pod off it (XL: 9 passes more, 15 CPU-s of solving)."""
        if self.nominations is None or self.nominations.held:
            return
        planned = self.state.nominations.get(key)
        if planned is None:
            return
        targets = (node, *self.state.claims_of_node(node))
        if planned[0] in targets:
            return  # bound where the pass placed it
        for other in self.state.nominated_to(targets):
            pod = self.state.pods.get(other)
            if pod is not None and not pod.node_name and pod.is_active():
                self.batcher.trigger(other)

    def _track_awaiting(self, key: str, pod: Pod | None) -> None:
        if pod is None or not awaits_scheduler(pod) or self.state.preempting(pod):
            self.awaiting.pop(key, None)
        elif key not in self.awaiting:
            now = self.clock.now()
            self.awaiting[key] = now
            self._not_due.append((now, key))
            self._arrivals.append(now)

    def early_keys(self) -> frozenset[str]:
        """Pods provisioned early now: unjudged for at least ``EARLY_AFTER_S`` and at most
        ``EARLY_UNTIL_S`` since first seen."""
        now = self.clock.now()
        return frozenset(
            k for k, since in self.awaiting.items() if EARLY_AFTER_S <= now - since <= EARLY_UNTIL_S
        )

    def provisionable_pods(self) -> list[Pod]:
        """The pods a pass solves for: upstream's rule plus the early ones."""
        return self.state.provisionable_pods(self.early_keys() if self.awaiting else frozenset())

    def _early_due(self, *, trigger: bool = True) -> None:
        """Trigger the batch for awaiting pods that just fell due (each once); a pass starting
        takes them without a trigger (they are in it: a trigger would open a window for a
        second pass that has nothing new)."""
        now = self.clock.now()
        while self._not_due and now - self._not_due[0][0] >= EARLY_AFTER_S:
            since, key = self._not_due.popleft()
            pod = self.state.pods.get(key)
            if self._still_awaiting(since, key) and pod is not None:
                # the scheduler's Unschedulable verdict, when it comes, is then no news
                self._triggered[key] = pod
                if trigger:
                    self.batcher.trigger(key, at=_arrived(since))

    def _held_until(self) -> float | None:
        """When the newest pod awaiting the scheduler for ``HOLD_AFTER_S`` falls due, if one
        not due yet exists: the open window waits for it (``Batcher.hold``); a pod of one of
        the window's ReplicaSets holds it as soon as it is seen. Else, while such a ReplicaSet
        is still creating the pods it was asked for, a moment more."""
        now = self.clock.now()
        for since, key in reversed(self._not_due):  # newest first
            age = now - since
            if age >= EARLY_AFTER_S:
                break  # this one and all older ones are due: in the pass already
            # a young pod holds too when it is one of a burst's (a sibling of the window's)
            young_ok = age >= HOLD_AFTER_S or self.bursts.tracks(key)
            if young_ok and self._still_awaiting(since, key):
                return since + EARLY_AFTER_S
        return now + BURST_HOLD_S if self.bursts.arriving() else None

    def not_due(self) -> int:
        """Pods seen awaiting the scheduler and not due yet (left for a later pass)."""
        now = self.clock.now()
        return sum(
            1
            for since, key in self._not_due
            if now - since < EARLY_AFTER_S and self._still_awaiting(since, key)
        )

    def _still_awaiting(self, since: float, key: str) -> bool:
        """Whether a ``_not_due`` entry is the pod's current wait (it was not bound, judged
        or gone, and seen anew, since)."""
        return self.awaiting.get(key) == since

    async def _early_loop(self) -> None:
        while True:
            await self.clock.sleep(EARLY_TICK_S)
            self._early_due()
            if self.batcher.pending:
                await self.bursts.refresh(self.batcher.keys)

    def trigger_all(self) -> None:
        """Trigger for every provisionable pod (a resync)."""
        for pod in self.provisionable_pods():
            self.batcher.trigger(pod.key)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Batch, solve and launch, forever."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._resync)
            if self.early:
                tg.start_soon(self._early_loop)
            self.trigger_all()
            task_status.started()
            while True:
                await self.batcher.wait()
                self.bursts.clear()
                try:
                    await self.provision()
                except (errors.ApiError, aiohttp.ClientError, OSError, CloudProviderError) as err:
                    self._log.warning("provisioning pass failed", error=str(err))

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(RESYNC_S)
            self.trigger_all()

    def _needs_launches(self) -> bool:
        if any(s.topology_key != lbl.HOSTNAME for s in self.default_spread):
            return True
        return any(needs_launched_claims(p) for p in self.provisionable_pods())

    async def _await_synced(self) -> bool:
        """Wait (at most ``SYNC_WAIT_S``) for the buffers' virtual pods and, when a pending
        pod needs them, for in-flight launches; whether launches were waited for."""
        launches = not self.state.synced() and self._needs_launches()
        deadline = self.clock.now() + SYNC_WAIT_S
        while not ((not launches or self.state.synced()) and self.state.virtual_pods.warm) and (
            self.clock.now() < deadline
        ):
            await self.clock.sleep(0.05)
        return launches

    async def provision(self) -> PassReport:
        """One pass over every provisionable pod."""
        began = self.clock.now()
        waited = await self._await_synced()
        pools = self.state.active_nodepools()
        now = self.clock.now()
        types = await instance_types(self.cloud, self.state, pools, now, self.options, self._log)
        # Snapshot and pending pods in one synchronous step: no event can slip in between.
        # Pods placed by an earlier pass carry that placement (their nomination), so they go
        # back to the in-flight capacity meant for them before any other pod is placed.
        cluster = self.state.snapshot(types)
        if self.early:
            self._early_due(trigger=False)
        early = self.early_keys() if self.awaiting else frozenset()
        provisionable = self.state.provisionable_pods(early)
        not_due = self.not_due()
        arrivals = _arrival_pattern(self._arrivals)
        self._arrivals.clear()
        pending = list(self.state.with_nominations(provisionable, self.clock.now()))
        virtual = list(cluster.virtual_pods)
        if not pending and not virtual:
            if self.nominations is not None:
                self.nominations.hold_for(())
            self.unschedulable = {}
            report = PassReport(0, (), {}, waited)
            self.passes.append(report)
            return report
        if self.default_spread:
            pending = await SpreadSelectors(self.kube).apply(pending, self.default_spread)
        if self.nominations is not None:
            self.nominations.hold_for(pending)
        started = self.clock.now()

        def run() -> tuple[Results, PassContext]:
            allocator.trim()  # the last pass's garbage, freed by now, back to the OS
            pods = [*pending, *virtual]
            return solve_pass(cluster, pods, self.options, hedge=self.options.mixing_hedge)

        results, ctx = await anyio.to_thread.run_sync(run)
        self.metrics.scheduler_scheduling_duration.labels(controller="provisioner").observe(
            self.clock.now() - started
        )
        self.metrics.scheduler_unschedulable_pods_count.labels(controller="provisioner").set(
            len(results.unschedulable)
        )
        solved = self.clock.now()
        created = await self._create_all(results, {p.name: p for p in pools})
        await self._report_nominations(results)
        await self._report_unschedulable(results)
        self._log_unschedulable(results)
        written = self.clock.now()
        # The bound only informs (log, metric): computed once the claims are on their way.
        bound = await anyio.to_thread.run_sync(lower_bound, ctx, results.new_claims)
        cost = lowerbound.cost(results.price, bound)
        self._record_cost(cost)
        if self.after_pass is not None and virtual:
            await self.after_pass(results, virtual)
        report = PassReport(len(pending), tuple(created), dict(results.unschedulable), waited)
        self.passes.append(report)
        # Where a pass spends its time: waiting for launches, solving, writing (claims, events).
        self._log.info(
            "provisioning pass",
            pods=len(pending),
            early=sum(1 for p in provisionable if p.key in early),
            not_due=not_due,
            window_s=round(self.batcher.last_window_s, 3),
            **arrivals,
            nodeclaims=len(created),
            nominations_held=self.nominations is not None and self.nominations.held,
            nominations_held_reason=self.nominations.held_reason if self.nominations else "",
            unschedulable=len(results.unschedulable),
            cost_per_hour=cost.per_hour,
            cost_lower_bound_per_hour=cost.lower_bound_per_hour,
            cost_ratio=cost.ratio,
            wait_s=round(now - began, 3),
            solve_s=round(solved - started, 3),
            write_s=round(written - solved, 3),
            bound_s=round(self.clock.now() - written, 3),
        )
        return report

    def _record_cost(self, cost: lowerbound.Cost) -> None:
        m = self.metrics
        m.scheduler_new_nodeclaims_price_per_hour.labels(controller="provisioner").set(
            cost.per_hour
        )
        m.scheduler_new_nodeclaims_price_lower_bound_per_hour.labels(controller="provisioner").set(
            cost.lower_bound_per_hour
        )
        if cost.ratio is not None:
            m.scheduler_new_nodeclaims_price_ratio.labels(controller="provisioner").set(cost.ratio)

    async def _create_all(self, results: Results, pools: Mapping[str, NodePool]) -> list[str]:
        created: list[str] = []

        async def one(claim: NewNodeClaim) -> None:
            name = await self._create(claim, pools[claim.nodepool])
            if name:
                created.append(name)
                until = self.clock.now() + self.nomination_s
                for pod in claim.pods:
                    if not is_virtual(pod):
                        self.state.nominate(pod.key, name, until)

        async with anyio.create_task_group() as tg:
            for claim in results.new_claims:
                tg.start_soon(one, claim)
        return sorted(created)

    async def _create(self, claim: NewNodeClaim, pool: NodePool) -> str:
        name = await create_nodeclaim(
            self.kube, self.state, self.metrics, claim, pool, "provisioned", self._log
        )
        if not name:
            return ""
        self.created_at[name] = self.clock.now()
        _trim(self.created_at)
        for pod in claim.pods:
            self.placed_at[pod.key] = self.created_at[name]
        _trim(self.placed_at)
        message = f"Pod should schedule on: nodeclaim/{name}"
        batch = [(p, events.NORMAL, "Nominated", message) for p in claim.pods if not is_virtual(p)]
        await self._publish(batch, sample=self.nominated_events)
        return name

    async def _publish(
        self,
        batch: Sequence[_Event],
        dedupe_s: float = events.DEFAULT_DEDUPE_S,
        sample: TokenBucket | None = None,
    ) -> None:
        """Hand a pass's Events to the recorder's background workers: a 1000-pod pass must
        not wait for 1000 round trips, nor spend the controller's client rate on them."""
        for pod, kind, reason, message in batch:
            reference = codec.pod_reference(pod)
            await self.recorder.publish(
                reference,
                kind,
                reason,
                message,
                dedupe_s=dedupe_s,
                background=True,
                sample=sample,
            )

    async def _report_nominations(self, results: Results) -> None:
        """Pods the pass placed on existing or in-flight capacity (deduplicated per node)."""
        until = self.clock.now() + self.nomination_s
        batch: list[_Event] = []
        for node_name, placed in results.existing:
            pods = [p for p in placed if not is_virtual(p)]
            for pod in pods:
                self.state.nominate(pod.key, node_name, until)
            kind = "node" if self.state.nodes.raw(node_name) is not None else "nodeclaim"
            message = f"Pod should schedule on: {kind}/{node_name}"
            batch.extend((pod, events.NORMAL, "Nominated", message) for pod in pods)
        await self._publish(batch, sample=self.nominated_events)

    def _log_unschedulable(self, results: Results) -> None:
        """Log each pod that became unschedulable (or whose reason changed) once; the pass
        line only counts them. CapacityBuffers' virtual pods are not pods: not logged."""
        real = {k: r for k, r in results.unschedulable.items() if self.state.pods.get(k)}
        for key, reason in sorted(real.items()):
            if self.unschedulable.get(key) != reason:
                self._log.info("pod is unschedulable", pod=key, reason=reason)
        self.unschedulable = real

    async def _report_unschedulable(self, results: Results) -> None:
        batch: list[_Event] = []
        for key, reason in sorted(results.unschedulable.items()):
            pod = self.state.pods.get(key)
            if pod is not None:
                message = f"Failed to schedule pod, {reason}"
                batch.append((pod, events.WARNING, "FailedScheduling", message))
        await self._publish(batch, FAILED_SCHEDULING_DEDUPE_S)


def _trim(times: dict[str, float]) -> None:
    """Forget the oldest entries (dicts keep insertion order) beyond ``HISTORY_KEYS``."""
    excess = len(times) - HISTORY_KEYS
    if excess > 0:
        for key in list(itertools.islice(times, excess)):
            del times[key]
