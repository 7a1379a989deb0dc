"""A bounded disruption pass acts on what it has, and the next pass resumes where it stopped.

The bound is counted in judgements (``WorkBound``), so these tests are exact, not timed: a
single-node walk cut short returns nothing and the next pass judges the unjudged candidates
first; multi-node cut short acts on the largest prefix it proved; a bound the search never
reaches changes nothing. Snapshots are the passes of the disruption benchmark's plan on 60
nodes (``bench/disruption.py``), each command applied before the next pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from bench.disruption import NOW, build
from karpenter.core.disruption.bound import MULTI, SINGLE, Resume, WorkBound
from karpenter.core.disruption.commands import METHOD_MULTI, METHOD_SINGLE, Command
from karpenter.core.disruption.context import new_pass
from karpenter.core.disruption.methods import consolidation_candidates
from karpenter.core.disruption.planner import apply, decide, name_replacements
from karpenter.core.model.cluster import Cluster, Options

UNBOUNDED = 10**9
OPTIONS = Options()


@dataclass(frozen=True)
class Snapshot:
    """One pass of a plan: the cluster, its command, and the judgements each method made."""

    cluster: Cluster
    command: Command
    multi: int
    single: int


def _decide(
    cluster: Cluster, bound: WorkBound, resume: Resume | None = None
) -> tuple[Command | None, list[str]]:
    command, ps = decide(
        cluster, OPTIONS, NOW, assume_consolidate_after_elapsed=True, bound=bound, resume=resume
    )
    return command, ps.timeouts


def _used(bound: WorkBound, method: str) -> int:
    return sum(n for m, n in bound.spent if m == method)


@cache
def plan_snapshots() -> tuple[Snapshot, ...]:
    """Every pass of the benchmark's plan on 60 nodes (seeds 0 and 1), each with its command."""
    found = []
    for seed in range(2):
        cluster = build(60, 8, 0.3, seed=seed)
        launched = 0
        while True:
            bound = WorkBound(UNBOUNDED)
            command, _ = _decide(cluster, bound)
            if command is None:
                break
            found.append(Snapshot(cluster, command, _used(bound, MULTI), _used(bound, SINGLE)))
            step = name_replacements(command, launched)
            launched += len(step.replacement_names)
            cluster = apply(cluster, step, NOW)
    return tuple(found)


def test_a_bound_the_search_never_reaches_changes_nothing() -> None:
    """With a bound larger than any search, every pass's command is the unbounded pass's."""
    for snap in plan_snapshots():
        plain, _ = decide(snap.cluster, OPTIONS, NOW, assume_consolidate_after_elapsed=True)
        bounded, timeouts = _decide(snap.cluster, WorkBound(UNBOUNDED))
        assert timeouts == []
        assert plain is not None and bounded is not None
        assert (bounded.method, bounded.names) == (plain.method, plain.names)


def test_cut_short_single_node_walk_resumes_after_what_it_judged() -> None:
    """A single-node walk stopped one judgement short of its command finds nothing, having
    judged what the bound allowed; the next pass, carrying the resume, judges the unjudged
    candidates first and finds the same command at once, and again when asked again."""
    walks = [s for s in plan_snapshots() if s.command.method == METHOD_SINGLE and s.single >= 3]
    assert walks, "no pass of the plans ends in a single-node command after three judgements"
    for snap in walks:
        resume = Resume()
        bound = WorkBound(snap.single - 1)
        first, timeouts = _decide(snap.cluster, bound, resume)
        assert first is None
        assert timeouts == [SINGLE]
        assert _used(bound, SINGLE) == snap.single - 1
        assert len(resume.judged) == snap.single - 1
        again = WorkBound(snap.single - 1)
        second, timeouts = _decide(snap.cluster, again, resume)
        assert second is not None and second.names == snap.command.names
        assert timeouts == []
        assert _used(again, SINGLE) == 1
        # the controller's validation decides again after its wait: the same resume, the same
        # order, the same command
        third, _ = _decide(snap.cluster, WorkBound(snap.single - 1), resume)
        assert third is not None and third.names == snap.command.names


def test_cut_short_multi_node_search_acts_on_the_largest_prefix_it_proved() -> None:
    """Multi-node stopped after k judgements returns a ranked prefix no longer than the
    unbounded search's (or nothing), having judged exactly k, and says it was cut short."""
    searches = [s for s in plan_snapshots() if s.command.method == METHOD_MULTI and s.multi >= 2]
    assert searches, "no pass of the plans ends in a multi-node command after two judgements"
    for snap in searches:
        ranked = [c.name for c in consolidation_candidates(new_pass(snap.cluster, OPTIONS, NOW))]
        for k in range(1, snap.multi):
            bound = WorkBound(k)
            command, timeouts = _decide(snap.cluster, bound)
            assert MULTI in timeouts
            assert _used(bound, MULTI) == k
            if command is not None and command.method == METHOD_MULTI:
                assert list(command.names) == ranked[: len(command.names)]
                assert len(command.names) <= len(snap.command.names)


def test_resume_puts_judged_candidates_last_and_starts_over_when_all_were() -> None:
    """The walk order keeps unjudged candidates first in rank order; once every candidate was
    judged, the next walk starts again from the top."""
    snap = plan_snapshots()[0]
    candidates = consolidation_candidates(new_pass(snap.cluster, OPTIONS, NOW))
    names = [c.name for c in candidates]
    resume = Resume()
    resume.walked(names[:3], complete=False)
    assert [c.name for c in resume.order(candidates)] == names[3:] + names[:3]
    resume.walked(names[3:], complete=False)
    assert [c.name for c in resume.order(candidates)] == names
    assert resume.judged == set()
    resume.walked(names[:2], complete=False)
    resume.walked(names[2:4], complete=True)
    assert resume.judged == set()
