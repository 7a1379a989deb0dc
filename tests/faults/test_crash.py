"""Crash anywhere, bounded (one trial per phase; ``bench/faults_crash.py`` runs the full
campaign): SIGKILL mid-launch, -registration, -disruption and -termination leaks no instance,
launches nothing twice, strands no finalizer and leaves no pod unplaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import ControlPlane
from tests.faults import crash

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.mark.asyncio
@pytest.mark.timeout(600)
async def test_sigkill_in_every_phase_loses_nothing(
    fault_plane: ControlPlane, moto_url: str, tmp_path: Path
) -> None:
    """After a SIGKILL and restart in each phase: 0 leaks, 0 duplicates, 0 stuck, 0 unplaced."""
    report = await crash.campaign(fault_plane, moto_url, len(crash.PHASES), 17, tmp_path)
    assert report.totals() == {
        "trials": 4, "leaks": 0, "duplicates": 0, "stuck": 0, "unplaced": 0, "crashes": 0
    }, report  # fmt: skip
    assert report.controller_starts == 5  # the first start and one restart per trial
