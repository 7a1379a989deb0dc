"""Disruption as a sequence: compute a command, apply it to the snapshot, repeat until quiet.

This is ``karpenter simulate --disruption``'s engine and the controller's single-pass entry
(``decide``). Applying a command completes it: candidates and their Nodes/NodeClaims leave the
snapshot, replacements join as initialized Nodes of their NodePool (stamped with the pool's
template hash, so they are not drifted), moved pods are bound to their destinations, and pods
nobody placed go back to pending. Each command therefore holds no budget from the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from karpenter.core.disruption.bound import Bound, Resume
from karpenter.core.disruption.candidates import (
    Blocked,
    SurveyMemo,
    in_flight,
    reschedulable,
    state_price,
)
from karpenter.core.disruption.commands import Command, destination
from karpenter.core.disruption.context import DisruptionPass, new_pass
from karpenter.core.disruption.methods import next_command
from karpenter.core.disruption.retries import FailedSplits
from karpenter.core.disruption.simulation import replacement_node
from karpenter.core.disruption.world import World
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.pod import Pod
from karpenter.core.provisioning.build import Reuse
from karpenter.core.provisioning.existing import state_nodes

REPLACEMENT_PREFIX = "simulated-"


@dataclass(frozen=True, slots=True)
class Step:
    """A command as carried out, with the names its replacements got."""

    command: Command
    replacement_names: tuple[str, ...]

    def destination(self, target: str) -> str:
        """A move's node name (``replacement:<i>`` resolved to the replacement's name)."""
        return destination(target, self.replacement_names)


@dataclass(frozen=True, slots=True)
class Plan:
    """Every command in order, the fleet price around them, and what stayed blocked."""

    steps: tuple[Step, ...]
    price_before: float
    price_after: float
    blocked: tuple[Blocked, ...]
    final: Cluster


def decide(
    cluster: Cluster,
    options: Options,
    now: float,
    *,
    assume_consolidate_after_elapsed: bool = False,
    reuse: Reuse | None = None,
    survey_memo: SurveyMemo | None = None,
    held: Mapping[str, str] | None = None,
    failed_splits: FailedSplits | None = None,
    bound: Bound | None = None,
    resume: Resume | None = None,
    settling: bool = False,
) -> tuple[Command | None, DisruptionPass]:
    """One controller pass: the command to start now (if any) and the pass's notes.

    Passing the same ``reuse`` (and ``survey_memo``) to successive passes keeps the solver's
    set-up (and the candidates of unchanged nodes) between them. ``held`` names nodes the
    shell keeps out of this pass, with the reason they are reported blocked. Passing the same
    ``failed_splits`` keeps splits that failed from being tried again (``retries``). ``bound``
    limits each consolidation method's search, and the same ``resume`` lets a cut-short
    single-node walk continue where it stopped (``bound``); the pass's ``timeouts`` name the
    methods it cut short. ``settling`` leaves emptiness and consolidation out while pods are
    on the move (``methods.next_command``).
    """
    ps = new_pass(
        cluster,
        options,
        now,
        assume_consolidate_after_elapsed=assume_consolidate_after_elapsed,
        reuse=reuse,
        survey_memo=survey_memo,
        held=held,
        failed_splits=failed_splits,
        bound=bound,
        resume=resume,
    )
    return next_command(ps, settling=settling), ps


def fleet_price(cluster: Cluster, *, staying: bool = False) -> float:
    """Hourly price of every managed node (and in-flight NodeClaim) of the snapshot; with
    ``staying``, leaving out the nodes on their way out (``in_flight``: deleting, or held by a
    disruption command whose replacements are already counted), the fleet as it will be."""
    types: dict[str, dict[str, InstanceType]] = {
        pool: {it.name: it for it in its} for pool, its in cluster.instance_types.items()
    }
    all_types = {name: it for its in types.values() for name, it in its.items()}
    return sum(
        state_price(s, types.get(s.nodepool, {}))
        for s in state_nodes(cluster, all_types)
        if s.nodepool and not (staying and in_flight(s))
    )


def apply(cluster: Cluster, step: Step, now: float) -> Cluster:
    """The snapshot after ``step`` completed."""
    command = step.command
    node_names = {c.state.node.name for c in command.candidates if c.state.node is not None}
    claim_names = {c.state.claim.name for c in command.candidates if c.state.claim is not None}
    destinations = {key: step.destination(target) for key, target in command.moves}
    pods: list[Pod] = []
    for pod in cluster.pods:
        if pod.node_name and pod.node_name in node_names:
            if pod.key in destinations:
                pods.append(replace(pod, node_name=destinations[pod.key]))
            elif reschedulable(pod):
                pods.append(replace(pod, node_name="", nominated_node_name=""))
            # DaemonSet and static pods go with their node.
            continue
        pods.append(pod)
    new_nodes = tuple(
        replacement_node(claim, name, cluster, now)
        for claim, name in zip(command.replacements, step.replacement_names, strict=True)
    )
    return replace(
        cluster,
        nodes=(*(n for n in cluster.nodes if n.name not in node_names), *new_nodes),
        nodeclaims=tuple(c for c in cluster.nodeclaims if c.name not in claim_names),
        pods=tuple(pods),
    )


def plan(
    cluster: Cluster,
    options: Options,
    now: float,
    *,
    max_commands: int | None = None,
    assume_consolidate_after_elapsed: bool = True,
) -> Plan:
    """Every command the controller would carry out from ``cluster``, each applied in turn.

    ``consolidateAfter`` counts as elapsed (the simulator's contract) unless
    ``assume_consolidate_after_elapsed`` is False: then it is counted at ``now`` as the
    controller counts it. The loop ends when a pass finds nothing; every command removes nodes
    or strictly lowers the price, so it ends. Passes run on a ``World`` (the snapshot carried
    from command to command, with the verdicts of earlier passes that still hold); such passes
    keep no notes, so the last pass runs plain, and its notes are the plan's ``blocked``. The
    world assumes consolidateAfter elapsed and knows no CapacityBuffer headroom: snapshots
    outside that run every pass plain.
    """
    limit = max_commands if max_commands is not None else 10 * (len(cluster.nodes) + 10)
    if not assume_consolidate_after_elapsed or cluster.virtual_pods:
        return _plan_plain(cluster, options, now, limit, assume_consolidate_after_elapsed)
    before = fleet_price(cluster)
    steps: list[Step] = []
    counter = 0
    blocked: Sequence[Blocked] = ()
    world = World(cluster, options, now)
    while len(steps) < limit:
        ps = world.next_pass()
        command = next_command(ps)
        world.passed(ps)
        if command is None:
            command, ps = decide(
                world.cluster,
                options,
                now,
                assume_consolidate_after_elapsed=True,
                reuse=world.reuse,
                failed_splits=world.failed_splits,
            )
            if command is None:
                blocked = _blocked(ps)
                break
        step = name_replacements(command, counter)
        counter += len(step.replacement_names)
        steps.append(step)
        world.apply(command, step.replacement_names)
    return Plan(tuple(steps), before, fleet_price(world.cluster), tuple(blocked), world.cluster)


def _plan_plain(
    cluster: Cluster, options: Options, now: float, limit: int, assume_elapsed: bool
) -> Plan:
    """``plan`` with every pass decided from scratch on the snapshot after each command."""
    before = fleet_price(cluster)
    steps: list[Step] = []
    counter = 0
    blocked: Sequence[Blocked] = ()
    reuse = Reuse()
    memo = SurveyMemo()
    failed = FailedSplits()
    while len(steps) < limit:
        command, ps = decide(
            cluster,
            options,
            now,
            assume_consolidate_after_elapsed=assume_elapsed,
            reuse=reuse,
            survey_memo=memo,
            failed_splits=failed,
        )
        if command is None:
            blocked = _blocked(ps)
            break
        step = name_replacements(command, counter)
        counter += len(step.replacement_names)
        steps.append(step)
        cluster = apply(cluster, step, now)
    return Plan(tuple(steps), before, fleet_price(cluster), tuple(blocked), cluster)


def name_replacements(command: Command, launched_before: int) -> Step:
    """The command as a step whose replacements are numbered after ``launched_before``."""
    count = len(command.replacements)
    names = tuple(f"{REPLACEMENT_PREFIX}{launched_before + i}" for i in range(1, count + 1))
    return Step(command, names)


def _blocked(ps: DisruptionPass) -> list[Blocked]:
    seen: dict[str, Blocked] = {}
    for b in [*ps.survey.blocked, *ps.notes]:
        seen.setdefault(b.name, b)
    return sorted(seen.values(), key=lambda b: b.name)
