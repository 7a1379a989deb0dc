"""The CEL engine behind kubelet expressions (cel-python): compile, check, evaluate.

The only module that imports ``celpy``. ``aws/core/kubeletexpr.py`` says what is evaluated
and when; this says how. The environment has upstream's variables and adds ``max`` and
``min`` (int and double). cel-python has no type checker, so "compiles" means: it parses, and
a probe evaluation with plausible values names no unknown variable or function, applies no
operator to the wrong types (``vcpus * 2.5`` is an error in CEL, as in cel-go) and returns a
number. A branch the probe does not take is only checked when a real type takes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from karpenter.providers.aws.core import kubeletexpr

_MEMO_LIMIT = 100_000
# an m5.large-like type: a division by zero here is not a compile error, only a wrong kind is
_PROBE: Mapping[str, int | str] = {
    "instance_type": "m5.large",
    "vcpus": 2,
    "memory_mib": 8192,
    "default_enis": 3,
    "ips_per_eni": 10,
    "max_pods": 29,
}


def _numbers(args: tuple[object, ...]) -> list[celtypes.IntType | celtypes.DoubleType]:
    numbers = [a for a in args if isinstance(a, (celtypes.IntType, celtypes.DoubleType))]
    # CEL has no implicit int/double conversion: max(1, 2.0) is as wrong as 1 + 2.0
    if not numbers or len(numbers) != len(args) or len({type(n) for n in numbers}) > 1:
        raise TypeError("max/min take numbers of one type (int or double)")
    return numbers


def _max(*args: object) -> celtypes.IntType | celtypes.DoubleType:
    return max(_numbers(args))


def _min(*args: object) -> celtypes.IntType | celtypes.DoubleType:
    return min(_numbers(args))


def _activation(variables: Mapping[str, int | str]) -> dict[str, celtypes.Value]:
    return {
        k: celtypes.StringType(v) if isinstance(v, str) else celtypes.IntType(v)
        for k, v in variables.items()
    }


@dataclass
class Engine:
    """Compiles kubelet expressions once each (by text) and evaluates them."""

    _env: celpy.Environment = field(default_factory=celpy.Environment)
    _programs: dict[str, celpy.Runner] = field(default_factory=dict)
    # cel-python takes ~0.4 ms per evaluation and a region has ~1,200 types: validation and
    # every catalogue rebuild would block the event loop for seconds without this memo
    _results: dict[tuple[str, tuple[tuple[str, int | str], ...]], float | str] = field(
        default_factory=dict
    )

    def _program(self, expression: str) -> celpy.Runner:
        program = self._programs.get(expression)
        if program is None:
            try:
                ast = self._env.compile(expression)
            except CELParseError as err:
                raise kubeletexpr.ExpressionError(_first_line(err)) from None
            program = self._env.program(ast, functions={"max": _max, "min": _min})
            self._programs[expression] = program  # only what parsed is kept
        return program

    def _run(self, expression: str, variables: Mapping[str, int | str]) -> object:
        try:
            return self._program(expression).evaluate(_activation(variables))
        except CELEvalError as err:
            raise _Failed(err) from None

    def compile_error(self, expression: str) -> str:
        """Why ``expression`` cannot be used (``""``: it compiles)."""
        try:
            result = self._run(expression, _PROBE)
        except kubeletexpr.ExpressionError as err:
            return f"does not parse: {err}"
        except _Failed as failed:
            cause = failed.cause
            if cause is KeyError:
                return f"undeclared reference ({failed.detail})"
            if cause is TypeError:
                return f"wrong argument types ({failed.detail})"
            return ""  # a runtime failure (division by zero, overflow): evaluation reports it
        if not isinstance(result, (celtypes.IntType, celtypes.DoubleType)):
            return f"must return an int or a double, not {type(result).__name__}"
        return ""

    def evaluate(self, expression: str, variables: Mapping[str, int | str]) -> float:
        """The number ``expression`` gives for ``variables``; raises ExpressionError."""
        key = (expression, tuple(sorted(variables.items())))
        known = self._results.get(key)
        if known is None:
            try:
                known = self._evaluate(expression, variables)
            except kubeletexpr.ExpressionError as err:
                known = str(err)  # failures are as deterministic as results
            if len(self._results) >= _MEMO_LIMIT:
                self._results.clear()  # bounded: a new instance-type list refills it
            self._results[key] = known
        if isinstance(known, str):
            raise kubeletexpr.ExpressionError(known)
        return known

    def _evaluate(self, expression: str, variables: Mapping[str, int | str]) -> float:
        try:
            result = self._run(expression, variables)
        except _Failed as failed:
            raise kubeletexpr.ExpressionError(
                f"{expression!r} failed for {variables.get('instance_type', '')}: {failed.detail}"
            ) from None
        if not isinstance(result, (celtypes.IntType, celtypes.DoubleType)):
            raise kubeletexpr.ExpressionError(f"{expression!r} did not return a number")
        # an int stays exact (an int32 overflow check needs it); the core rejects non-finite
        return int(result) if isinstance(result, celtypes.IntType) else float(result)


class _Failed(Exception):
    """A CELEvalError, with the Python exception class cel-python records as its cause."""

    def __init__(self, err: CELEvalError) -> None:
        super().__init__(str(err))
        args = err.args
        self.cause = args[1] if len(args) > 1 else None
        text = str(args[0]) if args else str(err)
        # cel-python's undeclared-reference message dumps the whole activation: keep the name
        self.detail = text.split(" (in activation", 1)[0]


def _first_line(err: Exception) -> str:
    return " ".join(str(err).split())[:200]
