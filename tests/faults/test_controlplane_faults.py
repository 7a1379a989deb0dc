"""Control-plane faults, bounded (one round of each; ``bench/faults_controlplane.py`` repeats):
an apiserver restart, an etcd compaction (410 Gone on every resumed watch) and a concurrent
writer bumping resourceVersions leave no duplicate launch, no lost deletion, no unbound pod."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ControlPlane
from tests.faults import cpfaults

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.mark.asyncio
@pytest.mark.timeout(400)
async def test_informers_relist_and_nothing_is_launched_twice_or_lost(
    fault_plane: ControlPlane,
) -> None:
    """Each fault round makes exactly one NodeClaim; deleted objects are gone; informers relist."""
    r = await cpfaults.experiment(fault_plane)
    assert (r.duplicates, r.lost_deletions, r.unplaced) == (0, [], 0), r
    assert r.gone_410, "the compacted revision was still readable"
    assert r.relists >= 2 * 11, r  # both restarts made every informer list again
    assert r.bumps > 0, r
