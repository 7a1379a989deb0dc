"""compact: the mirror's copies share repeated strings and drop managedFields."""

from __future__ import annotations

import json
from typing import Any

from karpenter.api.compact import compact, strip_managed_fields

_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-1",
        "namespace": "default",
        "labels": {"app": "web", "pod-template-hash": "769fdbfc78"},
        "managedFields": [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {}}}],
    },
    "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "message": "x" * 200}],
    },
}


def _decoded() -> dict[str, Any]:
    # a fresh json.loads per object, as every watch event is
    obj: dict[str, Any] = json.loads(json.dumps(_POD))
    return obj


def test_a_compact_copy_equals_the_object_without_managed_fields() -> None:
    """The copy is the same object minus metadata.managedFields; the caller's object is
    untouched (a write's response is still the caller's)."""
    original = _decoded()
    copy = compact(original)
    expected = _decoded()
    del expected["metadata"]["managedFields"]
    assert copy == expected
    assert original == _POD


def test_copies_of_separately_decoded_objects_share_their_strings() -> None:
    """Keys and short values are one string object across copies; a long message is not
    interned (mostly unique, it would only grow the intern table)."""
    a, b = compact(_decoded()), compact(_decoded())
    key_a = next(k for k in a["metadata"]["labels"] if k == "pod-template-hash")
    key_b = next(k for k in b["metadata"]["labels"] if k == "pod-template-hash")
    assert key_a is key_b
    assert (
        a["metadata"]["labels"]["pod-template-hash"] is b["metadata"]["labels"]["pod-template-hash"]
    )
    assert a["status"]["phase"] is b["status"]["phase"]
    raw_a, raw_b = _decoded(), _decoded()
    assert raw_a["status"]["phase"] is not raw_b["status"]["phase"]  # what json.loads does
    message_a = a["status"]["conditions"][0]["message"]
    assert message_a is not b["status"]["conditions"][0]["message"]


def test_strip_managed_fields_in_place_tolerates_odd_metadata() -> None:
    obj = _decoded()
    strip_managed_fields(obj)
    assert "managedFields" not in obj["metadata"]
    odd: dict[str, Any] = {"metadata": None}
    strip_managed_fields(odd)
    assert odd == {"metadata": None}
