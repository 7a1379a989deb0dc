"""The cost pass's work budget: a count of solver steps, so a pass is bounded and deterministic.

The cost pass runs on the controller's hot path, so its work must be bounded, and bounded by
something that gives the same answer on every run: never the clock. One unit is one simplex
iteration of an LP, one greedy fill or one node of the pricing search, or one simplex iteration
or branch-and-bound node of the integer program. Each step is charged what it used; LP solves
and searches are capped by what is left, and once nothing is left no step starts, so the pass
keeps the best verified plan it has (never dearer than first fit). HiGHS cannot cap the sum
of an integer program's iterations, so that one step starts only with ``packing.MIP_RESERVE``
units left, well above what it takes on the benchmark workloads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Budget:
    """Units a pass may spend (``limit``) and what it has spent so far."""

    limit: int = 200_000  # as Options.cost_work
    spent: int = 0

    @property
    def left(self) -> int:
        """Units not spent yet (0 once the budget is used up)."""
        return max(self.limit - self.spent, 0)

    @property
    def exhausted(self) -> bool:
        """Whether no further step may start."""
        return self.spent >= self.limit

    def charge(self, units: int) -> None:
        """Count ``units`` of work done."""
        self.spent += max(units, 0)
