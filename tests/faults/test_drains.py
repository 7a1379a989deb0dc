"""Drains under pressure on kwok, bounded (one seed; ``bench/faults_matrix.py drains`` runs
more): consolidation, drift and expiration at once never take a PDB below what it demands, every
evicted pod comes back, pods terminate within their own grace period, and do-not-disrupt pods
leave only at their node's grace deadline."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ControlPlane
from tests.faults import drains

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.mark.asyncio
@pytest.mark.timeout(500)
async def test_no_pdb_breach_and_every_pod_comes_back(fault_plane: ControlPlane) -> None:
    """0 PDB breaches, 0 pods that never came back, 0 do-not-disrupt pods gone before the
    terminationGracePeriod, 0 pods deleted with less grace than they ask or gone before it ran
    out; and the run really disrupted (nodes terminated, pods evicted and seen terminating)."""
    r = await drains.experiment(fault_plane, seed=5, count=3)
    assert (r.breaches, r.never_back, r.dnd_early) == ([], [], []), r
    assert (r.grace_cut, r.grace_not_honoured) == ([], []), r
    assert r.claims_deleted > 0 and r.evictions_seen > 0 and r.terminating_seen > 0, r
