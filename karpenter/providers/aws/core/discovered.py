"""Discovered capacity: real Node memory replaces the VM-overhead estimate once it is known.

The 7.5% ``VM_MEMORY_OVERHEAD_PERCENT`` guess makes large types look many GiB smaller than they
are (a common upstream complaint). Once a Node of a type registers with the AMIs the NodeClass
currently selects, its ``status.capacity.memory`` is remembered (the smallest value seen) for 60
days, keyed by (instance type, hash of the NodeClass's AMIs), and the catalogue uses it instead.
``now`` is passed in; nothing here reads a clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

TTL_SECONDS = 60 * 24 * 3600.0


def amis_key(ami_ids: Iterable[str]) -> str:
    """Order-insensitive key of a NodeClass's resolved AMIs."""
    return hashlib.sha256(",".join(sorted(set(ami_ids))).encode()).hexdigest()[:16]


@dataclass(slots=True)
class DiscoveredCapacity:
    """Smallest observed memory (milli-bytes) per (instance type, AMIs key), with expiry."""

    ttl: float = TTL_SECONDS
    _memory: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)

    def observe(self, instance_type: str, amis: str, memory_milli: int, now: float) -> None:
        """Record a registered Node's memory capacity (keeps the minimum, refreshes expiry)."""
        key = (instance_type, amis)
        current = self._memory.get(key)
        value = memory_milli if current is None else min(current[0], memory_milli)
        self._memory[key] = (value, now + self.ttl)

    def memory(self, instance_type: str, amis: str, now: float) -> int | None:
        """The remembered memory, if known and not expired."""
        found = self._memory.get((instance_type, amis))
        if found is None or found[1] <= now:
            return None
        return found[0]

    def for_amis(self, amis: str, now: float) -> dict[str, int]:
        """Every live entry for an AMIs key: instance type → memory (milli-bytes)."""
        return {t: v for (t, a), (v, until) in self._memory.items() if a == amis and until > now}
