"""Taints and tolerations: whether a pod may run on a node carrying a set of taints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint."""

    key: str
    effect: str
    value: str = ""

    def describe(self) -> str:
        """``key=value:Effect``."""
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (operator ``Equal`` or ``Exists``; empty effect matches every effect)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # An empty key with Equal never matches (the API rejects it); Equal compares values.
        return bool(self.key) and self.value == taint.value


PREFER_NO_SCHEDULE_TOLERATION = Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)


def untolerated(
    taints: Iterable[Taint], tolerations: Iterable[Toleration], *, include_prefer: bool = True
) -> list[Taint]:
    """Taints not tolerated. Karpenter treats PreferNoSchedule as hard until relaxed."""
    tols = tuple(tolerations)
    return [
        t
        for t in taints
        if (include_prefer or t.effect != PREFER_NO_SCHEDULE)
        and not any(tol.tolerates(t) for tol in tols)
    ]
