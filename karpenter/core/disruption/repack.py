"""Consolidating many candidates at once where upstream's methods stop: repack and batch delete.

Repack: the most wasteful candidates' pods packed again onto fewer, fuller nodes.

Multi-node consolidation replaces a prefix of candidates ranked by price per pod with at most
one node; single-node and split consolidation look at one to eight nodes at a time. A fleet in
which every node wastes a little (after a scale-down took pods from random places and the
kube-scheduler put the evicted ones where it liked) is a local optimum for all of them: no node
alone, and no prefix one node could replace, is cheaper to replace, yet one provisioning pass
over the same pods buys a cheaper fleet. The waste is spread thin, so only a command that takes
many nodes together and buys several can reach it.

Repack ranks the candidates by what they waste (price times the unused share of their fullest
resource, most first) and simulates removing growing prefixes of that order with the cost pass
(``simulation.reschedule(repack=True)``): the pods go first to the room of the other nodes,
then onto as few cheap NodeClaims as the cost pass finds. A prefix qualifies when every pod is
placed, fewer NodeClaims are needed than nodes removed (at most ``Options.max_replacements``:
more, smaller nodes would fragment the fleet again), their worst-case launch
prices add up to strictly less than the candidates' price (``split``'s rule, so no launch the
replacements allow can eat the savings) and the savings are more than rounding and than 5% of
the removed price (``MIN_SAVINGS``, ``MIN_SAVINGS_SHARE``); the prefix saving the most wins
(the smaller on a tie). Prefixes double each step and stop once one needs more NodeClaims
than allowed: larger ones would need more still. Every command lowers the fleet's price, so
repeating the method ends. It runs last (only when no other method finds a command), only
with ``max_replacements`` > 1 (the cost policy ``optimal``), and leaves spot candidates to the
spot-to-spot rules of the other methods.

Batch delete (``batch_delete``): candidates whose pods all fit on the other nodes together,
gathered greedily, as one delete (between multi- and single-node consolidation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from karpenter.core.disruption import split
from karpenter.core.disruption.bound import MULTI
from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.commands import METHOD_MULTI, METHOD_REPACK, Command
from karpenter.core.disruption.consolidation import balanced_rejection, strands
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.disruption.prefilter import short_of_room
from karpenter.core.disruption.ranking import repackable, waste, wasteful_key
from karpenter.core.disruption.simulation import Outcome, reschedule
from karpenter.core.model.nodepool import REASON_UNDERUTILIZED

MIN_PREFIX = 2
GROWTH = 2.0
# Savings at or below this ($/h) are rounding: prices linear in size make "13 nodes for 3 of
# the same total size" come out a few 1e-17 cheaper, which is churn, not savings.
MIN_SAVINGS = 1e-6
# And at least this share of the removed nodes' price: the kube-scheduler, not the plan, places
# the evicted pods, and a pod it leaves without room buys a node that eats a smaller saving.
# 5%, not 1%: on upstream's basic scale-down, repacks of 8 nodes saving 0.03-0.07 $/h (under
# 1% of a 52 $/h fleet) kept evicting pods for a minute after the fleet had reached 98 nodes.
MIN_SAVINGS_SHARE = 0.05
# A work limit: the orders hold at most this many candidates each (upstream's multi-node
# limit); the packing order is built over their union.
MAX_CANDIDATES = 100
# Candidates ``batch_delete`` judges one by one per pass (a work limit: each judgement
# simulates the whole set gathered so far, so the walk costs its length squared).
MAX_WALK = 32
# Candidates ``batch_delete`` first tries to delete in one go (upstream's multi-node limit).
MAX_BATCH = MAX_CANDIDATES
WhatIf = Callable[[Sequence[Candidate]], Outcome]


def _eligible(ranked: Sequence[Candidate]) -> list[Candidate]:
    """The ranked candidates repack may take: not spot, with pods to move."""
    return [c for c in ranked if repackable(c)]


def _within_budget(
    ps: DisruptionPass, order: Iterable[Candidate], limit: int | None = None
) -> list[Candidate]:
    """``order`` less the candidates past their pool's remaining budget (the first
    ``limit``)."""
    taken: dict[str, int] = {}
    out: list[Candidate] = []
    for c in order:
        if limit is not None and len(out) >= limit:
            break
        pool = c.nodepool.name
        if ps.allowed(REASON_UNDERUTILIZED, pool) - taken.get(pool, 0) > 0:
            taken[pool] = taken.get(pool, 0) + 1
            out.append(c)
    return out


def packing_order(candidates: Sequence[Candidate], outcome: Outcome) -> list[Candidate]:
    """``candidates`` grouped by the new NodeClaim their pods went to when all were removed
    together (``outcome``): a prefix then holds the pods of a few such NodeClaims whole, the
    mix one pass found cheap (those whose pods all found room elsewhere go last)."""
    claim_of = {}
    for key, target in outcome.moves:
        if target.startswith("replacement:"):
            claim_of[key] = int(target.split(":", 1)[1])
    last = len(outcome.claims)

    def first_claim(c: Candidate) -> int:
        return min((claim_of.get(p.key, last) for p in c.pods), default=last)

    return sorted(candidates, key=lambda c: (first_claim(c), -waste(c), c.name))


def orders(candidates: Sequence[Candidate], what_if: WhatIf) -> list[list[Candidate]]:
    """The orders whose prefixes repack tries: most waste first; cheapest first (small nodes
    full of pods waste nothing, yet the pods of many of them fill a large node for less); and
    by the NodeClaims one pass over the pods of the first half of both buys (``packing_order``).
    Each holds at most ``MAX_CANDIDATES``."""
    wasteful = sorted(candidates, key=lambda c: (-waste(c), c.name))[:MAX_CANDIDATES]
    cheap = sorted(candidates, key=lambda c: (c.price, -waste(c), c.name))[:MAX_CANDIDATES]
    half = MAX_CANDIDATES // 2
    names = {c.name for c in wasteful[:half]} | {c.name for c in cheap[:half]}
    pool = [c for c in wasteful + cheap if c.name in names]
    pool = list({c.name: c for c in pool}.values())
    return [wasteful, cheap, packing_order(pool, what_if(pool))]


def prefix_sizes(count: int) -> list[int]:
    """The prefix lengths tried for ``count`` candidates: 2, 4, 8, ... and ``count``."""
    sizes: list[int] = []
    k = MIN_PREFIX
    while k < count:
        sizes.append(k)
        k = max(k + 1, int(k * GROWTH))
    if count >= MIN_PREFIX:
        sizes.append(count)
    return sizes


def _what_if(ps: DisruptionPass, candidates: Sequence[Candidate]) -> Outcome:
    return reschedule(ps.cluster, candidates, ps.states, ps.options, ps.reuse, repack=True)


def _judge(ps: DisruptionPass, prefix: Sequence[Candidate], outcome: Outcome) -> Command | bool:
    """The command for ``prefix``, or whether a larger prefix is still worth trying."""
    if len(outcome.claims) > ps.options.max_replacements:
        return False
    if outcome.failures or outcome.homeless or outcome.uninitialized:
        return True
    if len(outcome.claims) >= len(prefix):
        return True  # fewer, fuller nodes only: more, smaller ones fragment the fleet
    price = sum(c.price for c in prefix)
    built = split.replacements(ps, outcome.claims, price) if outcome.claims else ()
    if not isinstance(built, tuple):
        return True
    command = Command(REASON_UNDERUTILIZED, METHOD_REPACK, tuple(prefix), built, outcome.moves)
    floor = max(MIN_SAVINGS, MIN_SAVINGS_SHARE * command.price_removed)
    if command.savings <= floor or balanced_rejection(ps, command) or strands(ps, command):
        return True
    return command


def command_for(ps: DisruptionPass, candidates: Sequence[Candidate]) -> Command | None:
    """The repack command for exactly ``candidates`` (validation judges a command's set
    again), or None when they no longer qualify."""
    judged = _judge(ps, candidates, _what_if(ps, candidates))
    return judged if isinstance(judged, Command) else None


def repack(ps: DisruptionPass, ranked: Sequence[Candidate]) -> Command | None:
    """The prefix (of one of ``orders``) whose repacking saves the most, if any saves."""
    if not ps.options.repack_consolidation:
        return None
    eligible = _eligible(ranked)
    if ps.options.max_replacements < 2 or len(eligible) < MIN_PREFIX:
        return None
    if ps.bound is not None:
        ps.bound.begin(MULTI)
    judged: dict[tuple[str, ...], Outcome] = {}

    def what_if(prefix: Sequence[Candidate]) -> Outcome:
        key = tuple(sorted(c.name for c in prefix))
        if key not in judged:
            judged[key] = _what_if(ps, prefix)
        return judged[key]

    best: Command | None = None
    for order in orders(eligible, what_if):
        best = _best_prefix(ps, _within_budget(ps, order), what_if, best)
    if best is not None:
        for c in best.candidates:
            ps.take(REASON_UNDERUTILIZED, c.nodepool.name)
    return best


def _best_prefix(
    ps: DisruptionPass,
    order: Sequence[Candidate],
    what_if: WhatIf,
    best: Command | None,
) -> Command | None:
    """``best``, or the prefix of ``order`` that saves more (stopping at the bound, or at the
    first prefix that needs more NodeClaims than allowed)."""
    for k in prefix_sizes(len(order)):
        if ps.over(MULTI):
            break
        judged = _judge(ps, order[:k], what_if(order[:k]))
        if judged is False:
            break
        if isinstance(judged, Command) and (best is None or judged.savings > best.savings):
            best = judged
    return best


def wasteful(ranked: Sequence[Candidate]) -> list[Candidate]:
    """The ranked candidates repack may take, most waste first (``ranking.wasteful_key``: the
    order a plan's candidate index keeps)."""
    return sorted(_eligible(ranked), key=wasteful_key)


def batch_delete(
    ps: DisruptionPass,
    order: Iterable[Candidate],
    undeletable: Callable[[str], bool] = lambda _: False,
) -> Command | None:
    """Candidates whose pods all fit on the other nodes together, gathered greedily (in
    ``order``: ``wasteful``'s, each kept only if the set with it still empties), as one delete
    when at least two gather. ``undeletable`` names candidates known not to empty alone
    (``ranking.CandidateIndex.known``): while nothing is gathered, they are passed over
    without a proof or what-if, as those would pass them over.

    Multi-node consolidation takes ranked prefixes, so a first candidate that cannot go stops
    it, and single-node consolidation then deletes the others one command (and one validation
    wait) at a time. The walk judges at most ``MAX_WALK`` candidates with first-fit what-ifs
    (a count, so the pass's time bound is left to the searches it was made for).

    When more than ``MAX_WALK`` candidates are in budget, the first ``MAX_BATCH`` of them are
    first simulated gone together (then the first half of them, while more than ``MAX_WALK``):
    a fleet of lightly used nodes (a scale-down of pods spread one per host) then goes in one
    command, not in rounds of ``MAX_WALK`` with a validation wait each (hostname-spread: 127
    nodes in four rounds, 25 s behind upstream's binary search over 100). Those known not to
    empty alone are left out: removing more nodes never makes room.
    """
    whole = _within_budget(ps, order, MAX_BATCH)
    if len(whole) < MIN_PREFIX:
        return None
    best = _all_gone(ps, [c for c in whole if not undeletable(c.name)])
    if best is None:
        best = _gathered(ps, whole[:MAX_WALK], undeletable)
    if best is not None:
        for c in best.candidates:
            ps.take(REASON_UNDERUTILIZED, c.nodepool.name)
    return best


def _gathered(
    ps: DisruptionPass, walk: Sequence[Candidate], undeletable: Callable[[str], bool]
) -> Command | None:
    """The greedy walk: each candidate kept if the set with it still empties."""
    kept: list[Candidate] = []
    best: Command | None = None
    for c in walk:
        if not kept and undeletable(c.name):
            continue
        trial = [*kept, c]
        command = _delete_if_all_fit(ps, trial)
        if command is None:
            continue
        kept = trial
        best = command if len(kept) >= MIN_PREFIX else None
    return best


def _all_gone(ps: DisruptionPass, trial: Sequence[Candidate]) -> Command | None:
    """The delete of the longest prefix of ``trial`` tried (all of it, then half, while more
    than a walk's worth) whose candidates can all go at once."""
    size = len(trial)
    while size > MAX_WALK:
        command = _delete_if_all_fit(ps, trial[:size])
        if command is not None:
            return command
        size //= 2
    return None


def _delete_if_all_fit(ps: DisruptionPass, trial: Sequence[Candidate]) -> Command | None:
    """A delete of ``trial`` if all their pods fit on the other nodes (and no Balanced pool
    vetoes it)."""
    if short_of_room(ps, trial):
        return None  # their pods exceed the room elsewhere: no delete (``prefilter``)
    outcome = reschedule(ps.cluster, trial, ps.states, ps.options, ps.reuse)
    if outcome.claims or outcome.failures or outcome.homeless or outcome.uninitialized:
        return None
    command = Command(REASON_UNDERUTILIZED, METHOD_MULTI, tuple(trial), (), outcome.moves)
    return None if balanced_rejection(ps, command) or strands(ps, command) else command
