"""Placements told to the kube-scheduler: ``status.nominatedNodeName`` on the pods a pass placed.

Not upstream (feature gate ``PublishNominations``, on by default). A provisioning pass packs
pods into planned nodes, but the kube-scheduler binds each pending pod to whichever Ready node
its scoring likes best when nodes come up one by one: a node bought for two small pods' worth
of leftovers receives two large pods instead, and the large pods' own node is left half empty.
In a 1000-pod burst that reshuffle cost 10-15 nodes over the plan's 140.

The scheduler has a hook for exactly this: a pending pod whose ``nominatedNodeName`` names a
node is tried on that node first, and bound there if it fits, without scoring the others; and
while it waits, the scheduler counts its requests on that node against every pod of equal or
lower priority, so no other pod takes its slot. Since Kubernetes 1.35
(``NominatedNodeNameForExpectation``, beta) the scheduler also keeps a nomination set by
another component when an attempt fails, which is what KEP-5278 made it for: autoscalers saying
where a pod will go (its preemption step still clears one when an attempt finds nothing to
preempt, so some pods lose theirs and bind by scoring: 92-98% kept them in the basic burst).
On older schedulers the nomination lasts until the pod's next failed attempt, so it still helps
when it lands just before the node becomes schedulable.

Nominations cost the scheduler where pods carry per-node constraints: a node with nominated
pods makes every filter run on it clone the pod's scheduling state with those pods added, and
for a DoNotSchedule topology spread or a required pod (anti-)affinity over the hostname that
state holds one count per node, so an attempt over N nodes copies N² counts (then again in
preemption's dry run). The 2000-pod XL burst (1000 pods spread over the hostname) ran 128 s
with nominations and 106 s without, on the same 1000 nodes (``bench/RESULTS.md``). So while
every pod a pass sees pending carries such a constraint, registrations publish nothing
(``held``); the pods bind by the scheduler's scoring, as upstream's do, and one such pod taking
another's slot strands nobody (each needs a node without its kind, and the other's is one).
Pods without them in the same pass are what the nominations keep out of those slots: held for
the whole pass, the do-not-disrupt burst's 100 unconstrained pods took the single slots
planned for hostname-spread pods, and the fleet was 557 nodes for a 500-node plan, 9% dearer
(46 s and 501 nodes published, 45 s and 557 held). A mixed pass publishes and pays the
scheduler's time (hostname-spread 40 s against 34 s held, same 500 nodes; wide 38 s against
31 s, 175 nodes against 181).

Nominations buy nothing when every pod a pass sees pending is interchangeable with every
other (one Deployment's burst: the same namespace, labels, requests, node selection, tolerations
and priority, with no spread, pod (anti-)affinity, host port or volume): whichever pod takes
whichever slot, each node ends with the pods it was planned for, counted by number, and the
scheduler cannot strand one. So such a pass holds them too (``interchangeable``), saving a
write per pod while the nodes register (1000 in a 1000-pod burst, five seconds of a 200 QPS
client) and letting each Node open as soon as it registers. A pass that sees another shape
pending publishes again.

So when a claim's Node registers (it still carries ``karpenter.sh/unregistered``, so nothing
can bind there yet), the lifecycle controller ``write``s the ``pending`` pods placed on the claim
(by any pass so far), then removes that taint, on one reservation of the client's throttle so the
Node write follows its nominations at once. Pods already bound, already nominated there
or just written are skipped; a failed write is logged and never holds up registration (the pod
then binds wherever the scheduler likes, as without this). A pass does not publish: placing pods
on capacity that is already up, from a mirror that may trail a burst by seconds, it would
re-nominate pods the scheduler has bound and move others off their plan (measured: 833 of 1000
pods re-nominated after binding, 147 nodes instead of 141).

The one exception is a nomination the scheduler took back: its preemption step clears a
pod's ``nominatedNodeName`` when an attempt finds the node not yet schedulable (an attempt that
another Node's arrival triggered, in the moment between the nominations and the untaint) and
nothing to preempt. The slot that nomination held is then open to any pod, and when the node
opens a pod planned for another node takes it, the planned pod is stranded and a node is bought
for it (seen in ``tests/e2e/test_nominations.py``: two small pods on one node, a third node for
a large one). So once the watch has shown a written nomination and then shows it cleared, the
pod still pending and still planned there, the publisher writes it again (``repair``), at most
``REPAIRS_PER_POD`` times a pod: a pod the scheduler keeps rejecting there is left to it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import anyio
import anyio.abc
import structlog

from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.controllers.context import ControllerContext
from karpenter.core.model import labels as lbl
from karpenter.core.model.pod import DO_NOT_SCHEDULE, Pod
from karpenter.core.provisioning.podwork import places_alike
from karpenter.kube import errors
from karpenter.kube.client import PODS
from karpenter.state.cluster import ClusterState, Obj

SENT_KEYS = 20_000  # pods remembered as written (the watch may not have brought them back)
REPAIRS_PER_POD = 3  # a nomination the scheduler cleared is written again at most this often


def planned_pods(
    state: ClusterState,
    targets: Collection[str],
    node_name: str,
    sent: Mapping[str, str] | None = None,
) -> list[Pod]:
    """Pending pods the provisioner placed on one of ``targets`` (a NodeClaim's name, its
    Node's name) that do not name ``node_name`` yet (nor were just written to), in key order."""
    out = []
    for key in state.nominated_to(targets):
        pod = state.pods.get(key)
        if pod is None or pod.node_name or not pod.is_active():
            continue
        if node_name not in (pod.nominated_node_name, (sent or {}).get(key)):
            out.append(pod)
    return out


def per_node_constraints(pod: Pod) -> bool:
    """Whether the kube-scheduler's filter state for ``pod`` holds a count per node: a
    DoNotSchedule topology spread or a required pod (anti-)affinity over the hostname."""
    if any(
        s.topology_key == lbl.HOSTNAME and s.when_unsatisfiable == DO_NOT_SCHEDULE
        for s in pod.topology_spread
    ):
        return True
    terms = (*pod.required_affinity, *pod.required_anti_affinity)
    return any(t.topology_key == lbl.HOSTNAME for t in terms)


def interchangeable(pods: Sequence[Pod]) -> bool:
    """Whether ``pods`` (two or more) are all alike to the kube-scheduler and to each other:
    one namespace, labels, requests, node selection, tolerations and priority, and nothing that
    ties a pod's placement to other pods or to a node's history (spread, pod (anti-)affinity,
    host ports, volumes)."""
    if len(pods) < 2:
        return False
    first = pods[0]
    return all(
        places_alike(p, first)
        and not p.ephemeral_volume_count
        and (p.namespace, p.labels, p.priority) == (first.namespace, first.labels, first.priority)
        for p in pods
    )


class NominationPublisher:
    """Writes ``status.nominatedNodeName`` for planned pods (a port the lifecycle controller
    calls at registration; nothing of its own runs)."""

    def __init__(self, ctx: ControllerContext) -> None:
        # The controller's own client and throttle: one write per pending pod is the
        # controller's load on the apiserver (a throttle of its own measured no faster: basic
        # 1000 pods 25 s / 141 nodes with it, 26 s / 142 nodes without).
        self.kube = ctx.kube
        self.state = ctx.state
        self.metrics = ctx.metrics
        self._log = structlog.get_logger().bind(controller="nominations")
        # pod key → the node last written, oldest first (bounded): a registration retried
        # before the watch brings a written pod back (a Conflict) does not write it again
        self.sent: dict[str, str] = {}
        # Set by each provisioning pass (``hold_for``), "" while registrations publish: a pod
        # it saw pending has per-node constraints, and nominations would make the scheduler's
        # attempts quadratic in the nodes, or every pod it saw pending is interchangeable, so
        # nominations would change nothing (see above).
        self.held_reason = ""
        # pods whose written nomination the watch has shown (a pod seen without one before
        # that is only the watch trailing the write), and how often each was repaired
        self._shown: set[str] = set()
        self._repairs: dict[str, int] = {}
        self.clock = ctx.clock
        self.queue: KeyedQueue[str] = KeyedQueue(ctx.clock, "nominations")
        ctx.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind != "Pod":
            return
        node = self.sent.get(key)
        if node is None:  # most pod events: one dict lookup
            return
        pod = self.state.pods.get(key)
        if pod is None or pod.node_name or not pod.is_active():
            self._forget(key)  # bound or gone: nothing left to hold
        elif pod.nominated_node_name == node:
            self._shown.add(key)
        elif not pod.nominated_node_name and key in self._shown:
            self._shown.discard(key)
            self.queue.add(key)
        elif pod.nominated_node_name:  # the scheduler's own (preemption): its call from now on
            self._shown.discard(key)

    def _forget(self, key: str) -> None:
        self._shown.discard(key)
        self._repairs.pop(key, None)

    def _remember(self, key: str, node: str) -> None:
        self.sent.pop(key, None)  # newest last: the oldest is the one let go
        self.sent[key] = node
        if len(self.sent) > SENT_KEYS:
            oldest = next(iter(self.sent))
            del self.sent[oldest]
            self._forget(oldest)

    def _unremember(self, key: str, node: str) -> None:
        if self.sent.get(key) == node:  # (the repair count stays: no repair loop)
            del self.sent[key]
            self._shown.discard(key)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Repair cleared nominations forever."""
        task_status.started()
        await self.queue.run(self.repair, 8)

    def planned_node(self, key: str) -> str:
        """The Node the provisioner's live plan puts pod ``key`` on ("" if none, or if the
        plan names a claim whose Node has not registered)."""
        entry = self.state.nominations.get(key)
        if entry is None or entry[1] <= self.clock.now():
            return ""
        claim = self.state.nodeclaims.get(entry[0])
        node = claim.node_name if claim is not None else entry[0]
        return node if node and self.state.nodes.raw(node) is not None else ""

    async def repair(self, key: str) -> float | None:
        """Write pod ``key``'s nomination again if the scheduler cleared it while the pod is
        still pending and still planned on the node it was written for."""
        node = self.sent.get(key)
        pod = self.state.pods.get(key)
        if (
            node is None
            or pod is None
            or pod.node_name
            or pod.nominated_node_name
            or not pod.is_active()
            or self.held
            or self._repairs.get(key, 0) >= REPAIRS_PER_POD
            or self.planned_node(key) != node
        ):
            return None
        self._repairs[key] = self._repairs.get(key, 0) + 1
        if await self.write([pod], node):
            self.metrics.pods_nomination_repairs.inc()
            self._log.debug("nomination repaired", pod=key, node=node)
        return None

    @property
    def held(self) -> bool:
        """Whether registrations publish nothing now."""
        return bool(self.held_reason)

    def hold_for(self, pending: Sequence[Pod]) -> None:
        """Decide, for the pods a pass sees pending, whether registrations publish (``held``,
        and why not: the machine-readable ``held_reason``): held when all of them carry
        per-node constraints, or all are interchangeable."""
        if pending and all(per_node_constraints(p) for p in pending):
            self.held_reason = "per_node_constraints"
        elif interchangeable(pending):
            self.held_reason = "interchangeable"
        else:
            self.held_reason = ""

    def pending(self, targets: Collection[str], node_name: str) -> list[Pod]:
        """The pods ``write`` would nominate to ``node_name`` for these targets."""
        return planned_pods(self.state, targets, node_name, self.sent)

    async def write(self, pods: Collection[Pod], node_name: str, *, throttle: bool = True) -> int:
        """Nominate ``node_name`` for ``pods``, all at once; how many were written.
        ``throttle=False`` when the caller reserved their tokens (``KubeClient.reserve``)."""
        written = 0

        async def one(pod: Pod) -> None:
            nonlocal written
            patch = {"status": {"nominatedNodeName": node_name}}
            # Recorded before the write: the watch may show the pod with its nomination before
            # this task reads the answer, and a nomination the watch showed is one to repair
            # if the scheduler clears it.
            self._remember(pod.key, node_name)
            try:
                # the watch brings the pod back; decoding 1000 answers here would only cost CPU
                await self.kube.merge_patch(
                    PODS,
                    pod.name,
                    patch,
                    namespace=pod.namespace,
                    subresource="status",
                    throttle=throttle,
                )
            except errors.ApiError as err:
                # NotFound (the pod went), Forbidden (no RBAC for pods/status): the pod binds
                # wherever the scheduler likes, as it would without a nomination.
                self._log.debug("nomination not written", pod=pod.key, error=str(err))
                self._unremember(pod.key, node_name)
                return
            except BaseException:  # a retried registration writes it again
                self._unremember(pod.key, node_name)
                raise
            written += 1

        async with anyio.create_task_group() as tg:
            for pod in pods:
                tg.start_soon(one, pod)
        if written:
            self.metrics.pods_nominated.inc(written)
            self._log.debug("nominated", node=node_name, pods=written)
        return written
