"""Split consolidation: replace candidates with several cheaper NodeClaims.

Upstream consolidation launches at most one replacement, so a node whose pods would be cheaper
on two smaller types (a CPU-heavy and a memory-heavy one, say) is never touched. When the
one-replacement verdict is "no" and ``Options.max_replacements`` allows more, the candidates'
removal is simulated again with the cost pass (``costpass``), which may repack the pods that
need new capacity into several claims. The command stands when every pod is placed, no more
than ``max_replacements`` claims are needed, and the replacements' worst-case launch prices
add up to strictly less than the candidates' price: each replacement keeps only the types
whose worst-case price stays within its share of the savings (its cheapest worst case plus an
equal part of the slack), so no launch it allows can eat the savings. A replacement that
could be spot or on-demand is pinned to spot, as single replacements are; all-spot candidates
are left to the spot-to-spot rules of single replacements. Savings under a billionth of the
candidates' price count as none (``splitbound.TIE``: a tie must not pass on rounding). How many
splits a pass simulates is bounded by counts (``worth_trying``), and none is simulated where
whole nodes prove that no two or more replacements can cost less (``splitbound``): on a
catalogue priced by size, a right-sized node's pods cost as much on two nodes as on one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from karpenter.core.disruption import prefilter, splitbound
from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.commands import Command, NoOp
from karpenter.core.disruption.consolidation import rebuild, worst_launch_price
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.disruption.simulation import Outcome, homeless_message, reschedule
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.nodepool import REASON_UNDERUTILIZED
from karpenter.core.provisioning.results import NewNodeClaim
from karpenter.core.scheduling.requirements import Requirement, Requirements

_SPOT = frozenset((lbl.CAPACITY_TYPE_SPOT,))
# Work limits (a split simulation runs the cost pass; these bound how many run, never time):
# a split is tried only when one node for the pods costs this much more than the fluid floor
# (where instance types fit the pods' shape, splitting rarely pays), for at most this many
# candidates together, and at most ``DisruptionPass.splits_left`` times per pass.
SPLIT_MARGIN = 0.10
MAX_SPLIT_CANDIDATES = 8


def worth_trying(
    ps: DisruptionPass,
    candidates: Sequence[Candidate],
    requests: res.Resources,
    one_node: float | None,
    held: res.Resources | None = None,
) -> bool:
    """Whether to simulate a split for pods needing ``requests`` of new capacity, which one
    node holds for ``one_node`` (None: no node does); ``held``: what of it the replacements
    must hold for certain (default: all of it)."""
    if not allowed(ps, candidates):
        return False
    floor = fluid_floor(ps, requests)
    price = sum(c.price for c in candidates)
    if floor >= price:
        return False  # no set of nodes holding them is cheaper than the candidates
    if one_node is not None and one_node <= floor * (1 + SPLIT_MARGIN):
        return False
    return not hopeless(ps, requests if held is None else held, price)


def hopeless(ps: DisruptionPass, held: res.Resources, price: float) -> bool:
    """Proven: no two or more nodes holding ``held`` cost less than ``price`` (whole nodes,
    ``splitbound``), so a split there fails whatever the repack finds."""
    if ps.whole_nodes is None:
        ps.whole_nodes = splitbound.WholeNodes(prefilter.price_table(ps))
    return not ps.whole_nodes.may_undercut(held, price)


def replaced(candidates: Sequence[Candidate], outcome: Outcome) -> dict[str, int]:
    """The requests of the candidates' pods a what-if put on new NodeClaims."""
    moved = {key for key, where in outcome.moves if where.startswith("replacement:")}
    return res.add(*(p.requests for c in candidates for p in c.pods if p.key in moved))


def fluid_floor(ps: DisruptionPass, requests: res.Resources) -> float:
    """A price no set of nodes whose cpu and memory add up to ``requests`` undercuts: the
    LP over the cheapest offering of every type, solved through its dual's vertices."""
    if ps.unit_prices is None:
        ps.unit_prices = _unit_prices(ps)
    cpu, memory = requests.get(res.CPU, 0), requests.get(res.MEMORY, 0)
    return max((cpu * a + memory * b for a, b in ps.unit_prices), default=0.0)


def _unit_prices(ps: DisruptionPass) -> list[tuple[float, float]]:
    """Vertices of {(a, b) >= 0 : a·cpu + b·memory <= price for every type}."""
    lines = []
    for types in ps.types_by_pool.values():
        for it in types.values():
            prices = [o.price for o in it.offerings if o.available]
            cpu, memory = it.allocatable.get(res.CPU, 0), it.allocatable.get(res.MEMORY, 0)
            if prices and cpu > 0 and memory > 0:
                lines.append((cpu, memory, min(prices)))
    if not lines:
        return []
    # walk the boundary from the memory axis (a = 0) to the cpu axis (b = 0)
    a = 0.0
    current = min(lines, key=lambda line: (line[2] / line[1], -line[0]))
    vertices = [(0.0, current[2] / current[1])]
    while True:
        step = None
        for line in lines:
            # where ``line`` cuts the current edge, beyond a, going down more steeply
            if line[0] * current[1] <= current[0] * line[1]:
                continue
            x = (line[2] * current[1] - current[2] * line[1]) / (
                line[0] * current[1] - current[0] * line[1]
            )
            if x > a and (step is None or x < step[0]):
                step = (x, line)
        end = current[2] / current[0]
        if step is None or step[0] >= end:
            vertices.append((end, 0.0))
            return vertices
        a, current = step
        vertices.append((a, (current[2] - current[0] * a) / current[1]))


def allowed(ps: DisruptionPass, candidates: Sequence[Candidate]) -> bool:
    """Whether a split may be tried for ``candidates`` under this pass's options and limits."""
    return ps.splits_left > 0 and possible(ps, candidates)


def possible(ps: DisruptionPass, candidates: Sequence[Candidate]) -> bool:
    """Whether the options let ``candidates`` be split at all (the pass's limit aside)."""
    if ps.options.max_replacements < 2 or len(candidates) > MAX_SPLIT_CANDIDATES:
        return False
    return not all(c.capacity_type == lbl.CAPACITY_TYPE_SPOT for c in candidates)


def consolidate_split(
    ps: DisruptionPass,
    candidates: Sequence[Candidate],
    method: str,
    base: Outcome | None = None,
    repacked: Callable[[], Outcome] | None = None,
) -> Command | NoOp:
    """The cheapest multi-replacement command for ``candidates``, or why there is none.

    ``base`` is the one-replacement what-if it follows: a split that failed after the same
    what-if before (``retries``) is not tried again, nor counted against the pass's limit;
    ``repacked`` gives the split's simulation from that what-if's first fit
    (``simulation.reschedule_kept``) instead of simulating it from the start."""
    record = ps.failed_splits
    if base is not None and record.failed(ps.cluster, ps.options, candidates, base):
        return NoOp("NotCheaper", "the same split failed before")
    result = _attempt(ps, candidates, method, repacked)
    if base is not None and isinstance(result, NoOp):
        record.remember(ps.cluster, ps.options, candidates, base)
    return result


def _attempt(
    ps: DisruptionPass,
    candidates: Sequence[Candidate],
    method: str,
    repacked: Callable[[], Outcome] | None,
) -> Command | NoOp:
    ps.splits_left -= 1
    if repacked is not None:
        outcome = repacked()
    else:
        outcome = reschedule(ps.cluster, candidates, ps.states, ps.options, ps.reuse, repack=True)
    if outcome.failures:
        return NoOp("Unschedulable", outcome.failure_message())
    if outcome.homeless:
        return NoOp("BufferUnschedulable", homeless_message(outcome))
    if outcome.uninitialized:
        return NoOp(
            "Uninitialized", f"pods would schedule on uninitialized node {outcome.uninitialized[0]}"
        )
    if len(outcome.claims) < 2:
        return NoOp("NotCheaper", "repacking the pods needs no more than one new node")
    if len(outcome.claims) > ps.options.max_replacements:
        return NoOp(
            "TooManyReplacements",
            f"can't remove without creating {len(outcome.claims)} replacements"
            f" (at most {ps.options.max_replacements})",
        )
    built = replacements(ps, outcome.claims, sum(c.price for c in candidates))
    if isinstance(built, NoOp):
        return built
    return Command(REASON_UNDERUTILIZED, method, tuple(candidates), built, outcome.moves)


def _pinned(claim: NewNodeClaim) -> frozenset[str] | None:
    ctype = claim.requirements.get_or_exists(lbl.CAPACITY_TYPE)
    if ctype.has(lbl.CAPACITY_TYPE_SPOT) and ctype.has(lbl.CAPACITY_TYPE_ON_DEMAND):
        return _SPOT
    return None


def _worst_prices(claim: NewNodeClaim, pin: frozenset[str] | None) -> list[tuple[float, int]]:
    reqs = claim.requirements
    if pin is not None:
        reqs = reqs.intersect(Requirements((Requirement(lbl.CAPACITY_TYPE, False, pin),)))
    out = []
    for i, it in enumerate(claim.instance_types):
        worst = worst_launch_price(it, reqs)
        if worst is not None:
            out.append((worst, i))
    return out


def replacements(
    ps: DisruptionPass, claims: Sequence[NewNodeClaim], budget: float
) -> tuple[NewNodeClaim, ...] | NoOp:
    """Each claim narrowed to the types whose worst launch keeps the total under ``budget``."""
    pins = [_pinned(c) for c in claims]
    worst = [_worst_prices(c, pin) for c, pin in zip(claims, pins, strict=True)]
    if any(not w for w in worst):
        return NoOp("NotCheaper", "a replacement has no type it could launch")
    floor = sum(min(p for p, _ in w) for w in worst)
    slack = budget - floor
    if slack <= budget * splitbound.TIE:
        return NoOp("NotCheaper", "can't replace with cheaper nodes")
    share = slack / len(claims)
    out = []
    for claim, pin, prices in zip(claims, pins, worst, strict=True):
        ceiling = min(p for p, _ in prices) + share
        kept = [claim.instance_types[i] for p, i in sorted(prices) if p < ceiling]
        built = rebuild(ps, claim, kept, pin)
        if isinstance(built, str):
            return NoOp("NotCheaper", built)
        out.append(built)
    return tuple(out)
