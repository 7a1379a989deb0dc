"""Crash anywhere on the simulated cloud + kwok, bounded (one trial per phase;
``bench/faults_matrix.py simcrash`` runs the full campaign): a SIGKILL mid-launch,
-registration, -disruption and -termination, then a restart, leaks no instance record, launches
nothing twice, strands no finalizer and leaves no pod short of Running."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import ControlPlane
from tests.faults import simcrash

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.mark.asyncio
@pytest.mark.timeout(600)
async def test_sigkill_in_every_phase_on_kwok_loses_nothing(
    fault_plane: ControlPlane, tmp_path: Path
) -> None:
    """After a SIGKILL and restart in each phase: 0 leaks, 0 orphan nodes, 0 duplicates,
    0 stuck, 0 pods never Running, and the controller never died on its own."""
    report = await simcrash.campaign(fault_plane, len(simcrash.PHASES), 7, tmp_path)
    assert report.totals() == {
        "trials": 4, "kills": 4, "leaks": 0, "orphan_nodes": 0, "duplicates": 0, "stuck": 0,
        "never_running": 0, "crashes": 0,
    }, report  # fmt: skip
    assert report.controller_starts == 5  # the first start and one restart per trial
