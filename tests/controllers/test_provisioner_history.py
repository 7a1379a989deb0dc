"""The provisioner's history (passes, claim and pod timestamps) stays bounded over a long run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from karpenter.controllers import provisioner

if TYPE_CHECKING:
    import pytest


def test_trim_keeps_the_newest_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provisioner, "HISTORY_KEYS", 3)
    times: dict[str, float] = {}
    for i in range(10):
        times[f"claim-{i}"] = float(i)
        provisioner._trim(times)
        assert len(times) <= 3
    assert list(times) == ["claim-7", "claim-8", "claim-9"]
