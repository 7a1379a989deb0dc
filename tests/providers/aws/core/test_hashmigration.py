"""The NodeClass hash migration's per-claim decisions."""

from __future__ import annotations

import pytest

from karpenter.providers.aws.core import hashmigration as hm
from karpenter.providers.aws.core import labels as awslbl

HASH = awslbl.ANNOTATION_NODECLASS_HASH
VERSION = awslbl.ANNOTATION_NODECLASS_HASH_VERSION
CURRENT = awslbl.NODECLASS_HASH_VERSION


@pytest.mark.parametrize(
    ("annotations", "drifted", "want"),
    [
        pytest.param(
            {HASH: "old", VERSION: "v5"}, False, {HASH: "new", VERSION: CURRENT}, id="old-version"
        ),
        pytest.param({HASH: "old", VERSION: "v5"}, True, {VERSION: CURRENT}, id="drifted-keeps"),
        pytest.param({}, False, {HASH: "new", VERSION: CURRENT}, id="never-stamped"),
        pytest.param({HASH: "old", VERSION: CURRENT}, False, {}, id="current-untouched"),
    ],
)
def test_claim_patch(annotations: dict[str, str], drifted: bool, want: dict[str, str]) -> None:
    """Claims on another version get the current version, and the class hash unless Drifted."""
    claim = hm.ClaimHash("c", annotations, drifted)
    assert hm.claim_patch(claim, "new") == want


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({VERSION: "v5"}, True, id="old"),
        pytest.param({}, True, id="unstamped"),
        pytest.param({VERSION: CURRENT}, False, id="current"),
    ],
)
def test_class_needs_migration(annotations: dict[str, str], want: bool) -> None:
    """Only a class stamped with the current version skips the migration."""
    assert hm.class_needs_migration(annotations) is want


def test_plan_sorted_and_skips_current() -> None:
    """The plan names only claims needing a patch, in name order."""
    claims = (
        hm.ClaimHash("b", {VERSION: "v5"}),
        hm.ClaimHash("c", {VERSION: CURRENT}),
        hm.ClaimHash("a", {VERSION: "v4"}, drifted=True),
    )
    assert hm.plan(claims, "h") == (
        ("a", {VERSION: CURRENT}),
        ("b", {VERSION: CURRENT, HASH: "h"}),
    )
