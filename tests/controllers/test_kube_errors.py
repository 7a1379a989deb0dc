"""Apiserver answers become the typed errors the drain branches on."""

from __future__ import annotations

import pytest

from karpenter.kube import errors

_TERMINATING = {
    "reason": "Forbidden",
    "message": 'pods "a" is forbidden: unable to create new content in namespace x',
    "details": {"causes": [{"reason": "NamespaceTerminating", "message": "namespace x"}]},
}
_MULTI = {
    "reason": "InternalError",
    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
    "does not support.",
}


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        pytest.param(429, {"reason": "TooManyRequests"}, errors.TooManyRequests, id="pdb-429"),
        pytest.param(500, _MULTI, errors.MultiplePDBs, id="multiple-pdbs"),
        pytest.param(500, {"message": "etcd timeout"}, errors.ApiError, id="plain-500"),
        pytest.param(403, _TERMINATING, errors.NamespaceTerminating, id="ns-terminating"),
        pytest.param(403, {"reason": "Forbidden"}, errors.Forbidden, id="rbac-403"),
        pytest.param(409, {"reason": "Conflict"}, errors.Conflict, id="uid-precondition"),
    ],
)
def test_eviction_answers_are_typed(status: int, body: object, kind: type[Exception]) -> None:
    """Each eviction outcome maps to exactly one error type."""
    err = errors.from_status(status, body)
    assert type(err) is kind
    assert err.status == status
