"""Replaying one writer's condition change onto a list another writer changed meanwhile."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.controllers.conditions import replay, replaying


def c(kind: str, status: str = "True", reason: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason or kind}


@pytest.mark.parametrize(
    ("before", "after", "fresh", "expected"),
    [
        pytest.param(
            [c("Launched")],
            [c("Launched"), c("Registered")],
            [c("Launched"), c("Drifted")],
            [c("Launched"), c("Drifted"), c("Registered")],
            id="added-condition-keeps-concurrent-drifted",
        ),
        pytest.param(
            [c("Ready", "False")],
            [c("Ready", "True")],
            [c("Ready", "False"), c("Consolidatable")],
            [c("Ready", "True"), c("Consolidatable")],
            id="changed-condition-wins-others-kept",
        ),
        pytest.param(
            [c("Consolidatable"), c("Ready")],
            [c("Ready")],
            [c("Consolidatable"), c("Ready"), c("Drifted")],
            [c("Ready"), c("Drifted")],
            id="removed-condition-removed-only",
        ),
        pytest.param(
            [c("Ready")],
            [c("Ready")],
            [c("Ready", "False")],
            [c("Ready", "False")],
            id="untouched-condition-takes-fresh-value",
        ),
    ],
)
def test_replay(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    fresh: list[dict[str, Any]],
    expected: list[dict[str, Any]],
) -> None:
    """Only the conditions this writer changed are applied; every other writer's stay."""
    assert replay(before, after, fresh) == expected


def test_replaying_reports_no_change_when_already_applied() -> None:
    """Re-applying a change already present writes nothing."""
    change = replaying([c("Ready", "False")], [c("Ready")])
    conds = [c("Ready"), c("Drifted")]
    assert change(conds) is False and conds == [c("Ready"), c("Drifted")]
