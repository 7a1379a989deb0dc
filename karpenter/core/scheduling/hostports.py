"""Host-port conflicts: two pods cannot bind the same port and protocol on overlapping IPs."""

from __future__ import annotations

from collections.abc import Iterable

from karpenter.core.model.pod import HostPort

_WILDCARD = ("", "0.0.0.0", "::")


def conflicts(a: HostPort, b: HostPort) -> bool:
    """Same port and protocol, and the IPs are equal or either is unspecified."""
    if a.port != b.port or a.protocol != b.protocol:
        return False
    return a.ip == b.ip or a.ip in _WILDCARD or b.ip in _WILDCARD


def any_conflict(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> HostPort | None:
    """The first wanted port that conflicts with a used one, if any."""
    used = tuple(used)
    for port in wanted:
        if any(conflicts(port, u) for u in used):
            return port
    return None
