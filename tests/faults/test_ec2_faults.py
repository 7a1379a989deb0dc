"""EC2 faults, bounded (``bench/faults_ec2.py`` runs more seeds and heavier rates): with
ICE (whole and partial), throttling, 5xx, resets and hung requests injected into real botocore
traffic, every pod is placed on pools that have capacity, the ICE cache shows in logs and
metrics, nothing leaks, the process never dies and no API is called in a storm."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import ControlPlane
from tests.faults import ec2faults

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

# A controller that retried without backoff would make thousands of calls a minute.
MAX_CALLS_PER_MINUTE = 120


@pytest.mark.asyncio
@pytest.mark.timeout(600)
async def test_ec2_faults_place_every_pod_and_leak_nothing(
    fault_plane: ControlPlane, moto_url: str, tmp_path: Path
) -> None:
    """Every fault kind is injected; all pods land on pools with capacity; 0 leaks, 0 crashes."""
    report = await ec2faults.experiment(fault_plane, moto_url, tmp_path, seed=3)
    assert ec2faults.summary(report) | {"injected": 0} == {
        "injected": 0, "unplaced": 0, "on_empty_pools": 0, "leaks": 0, "stuck": 0, "crashes": 0
    }, report  # fmt: skip
    kinds = {key.split("/")[1] for key in report.injected}
    assert {"ice", "throttle", "5xx", "reset", "timeout"} <= kinds, report.injected
    assert report.ice_metric > 0 and report.ice_log_lines > 0, report
    assert max(report.peak_per_minute.values()) <= MAX_CALLS_PER_MINUTE, report.peak_per_minute
    assert report.exit_codes == [0], report.exit_codes  # alive until the clean SIGTERM
