"""Typed apiserver errors: what a caller branches on instead of HTTP codes or message text.

::

    ApiError                 any non-2xx answer (``status``, ``reason``, ``message``)
    ├── Forbidden            403: RBAC or admission refused the request
    │   └── NamespaceTerminating  403: nothing new (an eviction either) in a namespace going away
    ├── NotFound             404: the object (or its collection) does not exist
    ├── Conflict             409: stale resourceVersion on update, or name already taken
    │   └── AlreadyExists    409 with reason AlreadyExists
    ├── Gone                 410: a watch/list resourceVersion is too old; relist
    ├── Invalid              422: schema, CEL or admission validation refused the object
    ├── TooManyRequests      429: throttled, or an eviction a PodDisruptionBudget refuses
    └── MultiplePDBs         500: an eviction of a pod that more than one PDB selects

    ClientSetupError         before any request: the client cannot be built or the cluster used
    ├── KubeconfigError      the kubeconfig is missing, unreadable or names no usable context
    ├── Unreachable          the apiserver does not answer (or refuses our credentials)
    └── MissingAPI           the apiserver does not serve Karpenter's CRDs
"""

from __future__ import annotations


class ApiError(Exception):
    """The apiserver answered with an error status."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message


class Forbidden(ApiError):
    """403."""


class NamespaceTerminating(Forbidden):
    """403 with cause NamespaceTerminating: the namespace is being deleted."""


class NotFound(ApiError):
    """404."""


class Conflict(ApiError):
    """409: optimistic-lock failure."""


class AlreadyExists(Conflict):
    """409 AlreadyExists: a create hit an existing name."""


class Gone(ApiError):
    """410: the resourceVersion is no longer in the watch cache."""


class Invalid(ApiError):
    """422: the object failed validation."""


class TooManyRequests(ApiError):
    """429: for an eviction, the pod's PodDisruptionBudget allows no disruption now."""


class MultiplePDBs(ApiError):
    """500: the eviction subresource refuses pods selected by more than one PDB."""


class ClientSetupError(Exception):
    """The cluster cannot be used at all; the message is one line for a person."""


class KubeconfigError(ClientSetupError):
    """The kubeconfig (or in-cluster credentials) cannot be loaded."""


class Unreachable(ClientSetupError):
    """The apiserver did not answer, or refused the credentials."""


class MissingAPI(ClientSetupError):
    """A resource the command needs (a CRD) is not served."""


# The apiserver reports this case only as a 500 InternalError; its message is the one way to
# tell it from a real server fault, so it is matched here and nowhere else.
_MULTIPLE_PDBS = "more than one PodDisruptionBudget"


def from_status(status: int, body: object) -> ApiError:
    """Build the typed error for an HTTP status and its (Status object) body."""
    reason = message = ""
    if isinstance(body, dict):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
    if status == 403:
        if _has_cause(body, "NamespaceTerminating"):
            return NamespaceTerminating(status, reason, message)
        return Forbidden(status, reason, message)
    if status == 404:
        return NotFound(status, reason, message)
    if status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
        return cls(status, reason, message)
    if status == 410:
        return Gone(status, reason, message)
    if status == 422:
        return Invalid(status, reason, message)
    if status == 429:
        return TooManyRequests(status, reason, message)
    if status == 500 and _MULTIPLE_PDBS in message:
        return MultiplePDBs(status, reason, message)
    return ApiError(status, reason, message)


def _has_cause(body: object, kind: str) -> bool:
    # a StatusCause's type travels in its JSON field "reason"
    details = body.get("details") if isinstance(body, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return any(isinstance(c, dict) and c.get("reason") == kind for c in causes or [])
