"""Finding the cause inside exception groups.

A failure inside a task group reaches the entry point wrapped in one or more
``BaseExceptionGroup`` layers; the CLI wants the one leaf a person should read about.
"""

from __future__ import annotations

from collections.abc import Iterator


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """Every non-group exception inside ``exc`` (``exc`` itself when it is not a group)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc


def first(exc: BaseException, types: tuple[type[BaseException], ...]) -> BaseException | None:
    """The first leaf of ``exc`` that is an instance of ``types`` (None when there is none)."""
    return next((e for e in leaves(exc) if isinstance(e, types)), None)
