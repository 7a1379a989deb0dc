"""Failover, bounded (one SIGKILL and one SIGTERM; ``bench/faults_failover.py`` repeats them):
the standby takes the Lease and acts, and the audit log never shows both replicas writing."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.e2e.conftest import ControlPlane
from tests.faults import failover

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

LEASE_S, RETRY_S = 15.0, 2.0  # kube/leader.py defaults (upstream's)


@pytest.mark.asyncio
@pytest.mark.timeout(400)
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_standby_takes_over_and_never_overlaps(
    fault_plane: ControlPlane, tmp_path: Path, how: signal.Signals
) -> None:
    """After the leader dies the other replica holds the Lease and provisions; no write of the
    two replicas interleaves. A clean stop hands over within a retry period; a SIGKILL within
    the lease duration plus retry periods (docs/reliability.md has the measured spread)."""
    r = await failover.one_round(fault_plane, how, tmp_path)
    assert r.overlaps == [], r
    assert r.writes_before > 0 and r.writes_after > 0, r
    if how == signal.SIGTERM:
        assert r.exit_code == 0 and r.failover_s <= 2 * RETRY_S + 1, r
    else:
        assert r.exit_code == -signal.SIGKILL and r.failover_s <= LEASE_S + 2 * RETRY_S, r
