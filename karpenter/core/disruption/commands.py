"""Disruption commands as data: what to remove, what to launch instead, where pods go.

The core only decides; the controller's queue (or ``karpenter simulate``) carries a command out:
launch the replacements, wait for them, then delete the candidates. ``moves`` lists every
reschedulable pod of the candidates with its destination: an existing node's name, or
``replacement:<i>`` for the i-th replacement (0-based).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.disruption.candidates import Candidate
from karpenter.core.provisioning.results import NewNodeClaim

DELETE = "delete"
REPLACE = "replace"

METHOD_EMPTINESS = "emptiness"
METHOD_DRIFT = "drift"
METHOD_MULTI = "multi"
METHOD_SINGLE = "single"
METHOD_REPACK = "repack"
METHOD_EXPIRATION = "expiration"
REPLACEMENT_PREFIX = "replacement:"


def destination(target: str, replacement_names: Sequence[str]) -> str:
    """A move's node name: ``replacement:<i>`` resolved to the i-th replacement's name."""
    if target.startswith(REPLACEMENT_PREFIX):
        return replacement_names[int(target.removeprefix(REPLACEMENT_PREFIX))]
    return target


@dataclass(frozen=True, slots=True)
class Command:
    """One disruption decision."""

    reason: str
    method: str
    candidates: tuple[Candidate, ...]
    replacements: tuple[NewNodeClaim, ...] = ()
    moves: tuple[tuple[str, str], ...] = ()

    @property
    def decision(self) -> str:
        """``delete`` when nothing is launched, else ``replace``."""
        return REPLACE if self.replacements else DELETE

    @property
    def price_removed(self) -> float:
        """Hourly price of the candidates."""
        return sum(c.price for c in self.candidates)

    @property
    def price_added(self) -> float:
        """Hourly price of the replacements' launches."""
        return sum(r.launch.price for r in self.replacements)

    @property
    def savings(self) -> float:
        """Hourly savings (negative when a forced replacement costs more)."""
        return self.price_removed - self.price_added

    @property
    def names(self) -> tuple[str, ...]:
        """The candidates' node names."""
        return tuple(c.name for c in self.candidates)


@dataclass(frozen=True, slots=True)
class NoOp:
    """Why a set of candidates yields no command (machine-readable ``kind`` + message)."""

    kind: str
    message: str
