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
_HEURISTICS = (
    "mip_allow_restart",
    "mip_heuristic_run_rins",
    "mip_heuristic_run_rens",
    "mip_heuristic_run_root_reduced_cost",
    "mip_heuristic_run_feasibility_jump",
)
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
    work: int = 0  # simplex iterations, plus branch-and-bound nodes for a MIP


class Master:
    """A linear program kept in one HiGHS instance across solves (column generation, diving).

    Rows are fixed up front; columns are appended and their lower bounds raised between
    solves, and every solve starts from the previous basis, so a re-solve after a few new
    columns or a raised bound costs a handful of simplex iterations instead of a cold start.
    """

    def __init__(self, row_lower: Sequence[float], row_upper: Sequence[float]) -> None:
        self._h = _solver()
        self._big = float(self._h.getInfinity())
        rows = len(row_lower)
        self._h.addRows(
            rows,
            [self._finite(v) for v in row_lower],
            [self._finite(v) for v in row_upper],
            0,
            [0] * rows,
            [],
            [],
        )
        self.columns = 0

    def _finite(self, value: float) -> float:
        return max(-self._big, min(self._big, value))

    def add_columns(
        self, costs: Sequence[float], entries: Sequence[Sequence[tuple[int, float]]]
    ) -> None:
        """Append columns (cost, (row, coefficient) entries each), bounded below by 0."""
        if not costs:
            return
        starts: list[int] = []
        index: list[int] = []
        value: list[float] = []
        for column in entries:
            starts.append(len(index))
            for row, coefficient in column:
                index.append(row)
                value.append(coefficient)
        n = len(costs)
        self._h.addCols(
            n, list(costs), [0.0] * n, [self._big] * n, len(index), starts, index, value
        )
        self.columns += n

    def set_lower(self, column: int, value: float) -> None:
        """Raise (or lower) one column's lower bound."""
        self._h.changeColBounds(column, value, self._big)

    def solve(self, iterations: int = ITERATION_LIMIT) -> Solution:
        """The LP optimum from the current basis: values, row duals, objective (not ``ok``
        when it needs more than ``iterations`` simplex iterations)."""
        self._h.setOptionValue("simplex_iteration_limit", min(iterations, ITERATION_LIMIT))
        self._h.run()
        return _result(self._h, False)


def _solver() -> _Solver:
    """A quiet, single-threaded, seeded HiGHS instance with the iteration limit set."""
    from highspy import _core  # noqa: PLC0415 - loaded on first use: most passes never optimize

    # _Highs is the plain solver; highspy.Highs adds callbacks and prints a banner on stdout.
    h = _core._Highs()
    for name, value in (
        ("output_flag", False),
        ("threads", 1),
        ("random_seed", 0),
        ("simplex_iteration_limit", ITERATION_LIMIT),
    ):
        h.setOptionValue(name, value)
    return h


def solve(
    model: Model,
    *,
    integer: bool = False,
    node_limit: int = NODE_LIMIT,
    gap: float = 1e-4,
    cutoff: float | None = None,
    lean: bool = False,
    iterations: int = ITERATION_LIMIT,
) -> Solution:
    """Solve ``model`` (as a MIP when ``integer``, to relative ``gap``; a MIP stops at
    ``cutoff``-or-dearer answers, keeping only cheaper ones). A ``lean`` MIP skips HiGHS'
    restarts and primal heuristics (sub-MIPs, feasibility jump): most of its time on small
    programs whose caller already holds a good answer (the cutoff). ``iterations`` caps the
    simplex iterations of each LP HiGHS solves (for a MIP: of each node's LP, not their sum)."""
    h = _solver()
    for name, value in (
        ("mip_max_nodes", node_limit),
        ("mip_rel_gap", gap),
        ("simplex_iteration_limit", min(iterations, ITERATION_LIMIT)),
    ):
        h.setOptionValue(name, value)
    if lean:
        for name in _HEURISTICS:
            h.setOptionValue(name, False)
    if cutoff is not None:
        h.setOptionValue("objective_bound", cutoff)
    big = h.getInfinity()
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
    work = int(info.simplex_iteration_count) + (max(int(info.mip_node_count), 0) if integer else 0)
    if not usable or not feasible:
        bound = float(info.mip_dual_bound) if integer else -INF
        return Solution(False, bound=bound, work=work)
    objective = float(info.objective_function_value)
    if integer:
        bound = float(info.mip_dual_bound)
        duals: tuple[float, ...] = ()
    else:
        bound = objective
        duals = tuple(solution.row_dual)  # highspy hands back lists of Python floats
    values = tuple(solution.col_value)
    return Solution(True, values, duals, objective, bound, work)
