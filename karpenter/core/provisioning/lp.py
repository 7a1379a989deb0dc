"""Linear and mixed-integer programs for the cost pass, solved by HiGHS (the only highspy user).

A model is given column by column (cost, bounds, sparse entries per row) with row bounds, and
solved to a plain result: values, row duals (LPs), objective and the proven bound (MIPs). Runs
are deterministic: one thread, a fixed random seed, no time limit; work is bounded by counts
(simplex iterations, branch-and-bound nodes), so the same model gives the same answer on every
run. HiGHS is imported on first use, so passes that never optimize never pay for loading it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from highspy._core import _Highs as _Solver

INF = float("inf")
_OPTIMAL = 7  # HighsModelStatus.kOptimal
_FEASIBLE = 2  # kSolutionStatusFeasible: a MIP stopped at a work limit may still have one

ITERATION_LIMIT = 200_000
NODE_LIMIT = 200


@dataclass(slots=True)
class Model:
    """A minimization model built column by column (rows are fixed up front)."""

    row_lower: list[float]
    row_upper: list[float]
    costs: list[float] = field(default_factory=list)
    col_lower: list[float] = field(default_factory=list)
    col_upper: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=lambda: [0])
    index: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    integer: list[int] = field(default_factory=list)

    def add_column(
        self,
        cost: float,
        entries: Sequence[tuple[int, float]],
        lower: float = 0.0,
        upper: float = INF,
        *,
        integer: bool = False,
    ) -> int:
        """Append a column (``entries``: (row, coefficient)); returns its index."""
        self.costs.append(cost)
        self.col_lower.append(lower)
        self.col_upper.append(upper)
        for row, coefficient in entries:
            if coefficient:
                self.index.append(row)
                self.value.append(coefficient)
        self.starts.append(len(self.index))
        self.integer.append(1 if integer else 0)
        return len(self.costs) - 1

    @property
    def columns(self) -> int:
        """How many columns the model has."""
        return len(self.costs)


@dataclass(frozen=True, slots=True)
class Solution:
    """What a solve found: ``ok`` is False when HiGHS had no usable answer."""

    ok: bool
    values: tuple[float, ...] = ()
    duals: tuple[float, ...] = ()
    objective: float = INF
    bound: float = -INF  # proven lower bound (MIPs stopped at a limit still have one)


def solve(
    model: Model,
    *,
    integer: bool = False,
    node_limit: int = NODE_LIMIT,
    gap: float = 1e-4,
) -> Solution:
    """Solve ``model`` (as a MIP when ``integer``, to relative ``gap``)."""
    from highspy import _core  # noqa: PLC0415 - loaded on first use: most passes never optimize

    # _Highs is the plain solver; highspy.Highs adds callbacks and prints a banner on stdout.
    h = _core._Highs()
    for name, value in (
        ("output_flag", False),
        ("threads", 1),
        ("random_seed", 0),
        ("simplex_iteration_limit", ITERATION_LIMIT),
        ("mip_max_nodes", node_limit),
        ("mip_rel_gap", gap),
    ):
        h.setOptionValue(name, value)
    big = _core.kHighsInf
    h.passModel(
        model.columns,
        len(model.row_lower),
        len(model.index),
        1,  # column-wise matrix
        1,  # minimize
        0.0,
        model.costs,
        model.col_lower,
        [big if v == INF else v for v in model.col_upper],
        [-big if v == -INF else v for v in model.row_lower],
        [big if v == INF else v for v in model.row_upper],
        model.starts,
        model.index,
        model.value,
        model.integer if integer else [0] * model.columns,
    )
    h.run()
    return _result(h, integer)


def _result(h: _Solver, integer: bool) -> Solution:
    status = int(h.getModelStatus())
    info = h.getInfo()
    solution = h.getSolution()
    feasible = info.primal_solution_status == _FEASIBLE and solution.value_valid
    usable = status == _OPTIMAL or integer
    if not usable or not feasible:
        bound = float(info.mip_dual_bound) if integer else -INF
        return Solution(False, bound=bound)
    objective = float(info.objective_function_value)
    if integer:
        bound = float(info.mip_dual_bound)
        duals: tuple[float, ...] = ()
    else:
        bound = objective
        duals = tuple(float(d) for d in solution.row_dual)
    return Solution(True, tuple(float(v) for v in solution.col_value), duals, objective, bound)
