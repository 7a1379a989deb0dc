"""Go duration strings (``1s``, ``500ms``, ``1h30m``) as Kubernetes and Karpenter write them."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|m|s|ms|us|µs|ns))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration; raises ValueError naming the bad text."""
    text = text.strip()
    if text == "0":
        return 0.0
    if not _DURATION.match(text):
        raise ValueError(f"invalid duration {text!r} (examples: 10s, 500ms, 1m30s)")
    return sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))
