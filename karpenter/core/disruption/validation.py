"""Validating a command after the controller's wait: its own candidates, judged again.

The controller waits before it starts an emptiness or consolidation command (upstream: 15 s),
so pods that were about to land or leave have done so. Upstream then checks the command
itself, not a fresh decision: its candidates must still be candidates within budget, and
judging exactly them again must give the same kind of command (a delete stays a delete, a
replacement the same number of NodeClaims). A fresh decision would name other candidates
whenever anything in the cluster moved the ranking (a pod finishing its termination, a node
joining), and throw away commands that are still good. The command carried out is the one
judged again, with replacements priced on the fresh snapshot.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from karpenter.core.disruption import repack
from karpenter.core.disruption.candidates import Candidate, SurveyMemo
from karpenter.core.disruption.commands import (
    METHOD_EMPTINESS,
    METHOD_MULTI,
    METHOD_REPACK,
    METHOD_SINGLE,
    Command,
    destination,
)
from karpenter.core.disruption.consolidation import consolidate
from karpenter.core.disruption.context import DisruptionPass, new_pass
from karpenter.core.disruption.ranking import consolidatable
from karpenter.core.disruption.simulation import replacement_node
from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.model.nodepool import REASON_EMPTY, REASON_UNDERUTILIZED
from karpenter.core.provisioning.build import Reuse
from karpenter.core.scheduling.taints import Taint

VALIDATED = frozenset({METHOD_EMPTINESS, METHOD_MULTI, METHOD_REPACK, METHOD_SINGLE})


def _still_empty(c: Candidate) -> bool:
    pool = c.nodepool
    return (
        c.empty
        and pool.disruption.consolidate_after is not None
        and pool.replicas is None
        and c.consolidatable
        and not c.pod_blocker
    )


def _judge(ps: DisruptionPass, command: Command, candidates: list[Candidate]) -> Command | str:
    if command.method == METHOD_EMPTINESS:
        busy = [c.name for c in candidates if not _still_empty(c)]
        if busy:
            return f"NotEmpty: {', '.join(busy)} no longer empty or no longer deletable as empty"
        return Command(command.reason, command.method, tuple(candidates))
    blocked = [c for c in candidates if not consolidatable(c)]
    if blocked:
        return "NotConsolidatable: " + "; ".join(
            f"{c.name}: {c.pod_blocker}" if c.pod_blocker else c.name for c in blocked
        )
    if command.method == METHOD_REPACK:
        repacked = repack.command_for(ps, candidates)
        return repacked if repacked is not None else "NotCheaper: the repack no longer holds"
    judged = consolidate(ps, candidates, command.method)
    return judged if isinstance(judged, Command) else f"{judged.kind}: {judged.message}"


def judge_again(
    cluster: Cluster,
    options: Options,
    now: float,
    command: Command,
    *,
    reuse: Reuse | None = None,
    survey_memo: SurveyMemo | None = None,
    held: Mapping[str, str] | None = None,
) -> Command | str:
    """``command`` judged again on ``cluster``, or why it no longer holds: a machine-readable
    first word (``NotCandidate``, ``BudgetExceeded``, ``NotEmpty``, ``NotConsolidatable``, a
    consolidation NoOp's kind, ``DecisionChanged``, ``ReplacementsChanged``) and the detail."""
    ps = new_pass(cluster, options, now, reuse=reuse, survey_memo=survey_memo, held=held)
    fresh = {c.name: c for c in ps.candidates}
    gone = [name for name in command.names if name not in fresh]
    if gone:
        why = {b.name: b.reason for b in ps.notes}
        return "NotCandidate: " + "; ".join(f"{n}: {why.get(n, 'gone')}" for n in gone)
    candidates = [fresh[name] for name in command.names]
    reason = REASON_EMPTY if command.method == METHOD_EMPTINESS else REASON_UNDERUTILIZED
    for c in candidates:
        if not ps.take(reason, c.nodepool.name):
            return f"BudgetExceeded: nodepool {c.nodepool.name} has no {reason} budget left"
    judged = _judge(ps, command, candidates)
    if isinstance(judged, str):
        return judged
    if judged.decision != command.decision:
        return f"DecisionChanged: {command.decision} is now {judged.decision}"
    if len(judged.replacements) != len(command.replacements):
        return (
            f"ReplacementsChanged: {len(command.replacements)} replacement(s) "
            f"are now {len(judged.replacements)}"
        )
    return judged


def as_in_flight(cluster: Cluster, nodes: Collection[str]) -> Cluster:
    """``cluster`` with ``nodes`` marked as a started command marks them (the disrupted taint).

    Commands still in their validation wait hold their nodes exactly as commands in flight do:
    a decision taken meanwhile neither picks those nodes again nor counts on their room (their
    pods are rescheduled in its what-ifs), and the budgets count them as disrupting. So the
    controller can decide the next command during one's wait instead of after it, and every
    command it starts was judged with all the others it starts beside it.
    """
    if not nodes:
        return cluster
    mark = Taint(lbl.TAINT_DISRUPTED, "NoSchedule")
    marked = tuple(
        replace(n, taints=(*n.taints, mark))
        if n.name in nodes and all(t.key != lbl.TAINT_DISRUPTED for t in n.taints)
        else n
        for n in cluster.nodes
    )
    return replace(cluster, nodes=marked)


def as_started(cluster: Cluster, commands: Sequence[Command], now: float) -> Cluster:
    """``cluster`` as it will be once ``commands`` (waiting out their validation) have started
    and moved their pods: their nodes marked as in flight (``as_in_flight``), the pods they move
    bound where they move them, and their replacements present, not initialized yet.

    Marking alone left the commands' pods to be rescheduled in every later what-if together
    with the next command's candidates' pods, where the solver may give the room they need to
    the candidates and send them to new NodeClaims that hold none of the candidates' pods and
    so are not the command's business: each command of a round then counted on the same room.
    One round on upstream's basic scenario removed 65 nodes and added 8, leaving 1,359 CPUs for
    pods that request 1,540, and the provisioner bought 20 nodes for the 80 pods left pending.
    With every earlier command's pods where that command puts them, a later command sees only
    the room they leave. Replacements are not initialized, so a later command whose pods would
    land on one is refused, as it would be after the earlier command started.
    """
    if not commands:
        return cluster
    marked = as_in_flight(cluster, [name for command in commands for name in command.names])
    destinations: dict[str, str] = {}
    new_nodes = []
    for i, command in enumerate(commands):
        names = [f"round-{i}-replacement-{j}" for j in range(len(command.replacements))]
        for claim, name in zip(command.replacements, names, strict=True):
            node = replacement_node(claim, name, cluster, now)
            labels = {k: v for k, v in node.labels.items() if k != lbl.INITIALIZED}
            new_nodes.append(replace(node, labels=labels))
        for key, target in command.moves:
            destinations[key] = destination(target, names)
    # a destination gone during the wait: the pod stays and is rescheduled in every what-if
    present = {n.name for n in marked.nodes} | {n.name for n in new_nodes}
    pods = tuple(
        replace(p, node_name=destinations[p.key], nominated_node_name="")
        if p.node_name and destinations.get(p.key) in present
        else p
        for p in marked.pods
    )
    return replace(marked, nodes=(*marked.nodes, *new_nodes), pods=pods)
