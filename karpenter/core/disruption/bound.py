"""The bound on one pass's consolidation search, and where the next pass resumes.

Upstream bounds multi-node consolidation at one minute and single-node at three; on a timeout
multi-node acts on the best command it has found and single-node on none, and the next
single-node run starts with the NodePools the timed-out run did not reach. The core keeps no
clock, so the bound is a ``Bound`` the caller supplies: the controller's reads its injected
clock (``controllers/disruption.py``), ``WorkBound`` counts judgements (deterministic, for
tests and benchmarks). ``Resume`` is carried from pass to pass by the caller, like
``retries.FailedSplits``: the candidates a cut-short single-node walk already judged go last
next time, so a large cluster's walk covers every candidate over several passes instead of
the same first ones each pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from karpenter.core.disruption.candidates import Candidate

MULTI = "multi"
SINGLE = "single"


class Bound(Protocol):
    """How long a consolidation method may keep judging candidates in one pass."""

    def begin(self, method: str) -> None:
        """``method`` (``MULTI`` or ``SINGLE``) starts its search now."""
        ...

    def over(self) -> bool:
        """Asked before each judgement: True once the method must act on what it has."""
        ...


@dataclass(slots=True)
class WorkBound:
    """At most ``judgements`` judgements per method and pass (a count, not a time)."""

    judgements: int
    used: int = 0
    # Judgements allowed per method over the bound's life, oldest first (tests read it).
    spent: list[tuple[str, int]] = field(default_factory=list)

    def begin(self, method: str) -> None:
        """Start counting again for ``method``."""
        self.used = 0
        self.spent.append((method, 0))

    def over(self) -> bool:
        """True once ``judgements`` were allowed since ``begin``; else count one more."""
        if self.used >= self.judgements:
            return True
        self.used += 1
        method, _ = self.spent[-1]
        self.spent[-1] = (method, self.used)
        return False


@dataclass(slots=True)
class Resume:
    """Candidates a cut-short single-node walk judged, to be judged last by the next walk."""

    judged: set[str] = field(default_factory=set)
    cut_short: int = 0  # single-node walks the bound cut short (logs and tests)

    def order(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """``candidates`` with those already judged moved to the end (order kept otherwise);
        once every one was judged, the walk starts over from the top."""
        fresh = [c for c in candidates if c.name not in self.judged]
        if not fresh:
            self.judged.clear()
            return list(candidates)
        return fresh + [c for c in candidates if c.name in self.judged]

    def walked(self, names: Sequence[str], complete: bool) -> None:
        """A single-node walk judged ``names``; ``complete``: it ended without the bound."""
        if complete:
            self.judged.clear()
        else:
            self.judged.update(names)
            self.cut_short += 1
