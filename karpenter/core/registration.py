"""A NodePool's ``NodeRegistrationHealthy`` condition, from its last few launch outcomes.

Upstream keeps, per NodePool, the outcomes of the last 4 NodeClaims that either registered
(success) or hit the launch / registration timeout (failure). The pool is unhealthy once half of
that window failed, healthy otherwise, unknown with no outcome yet. The condition turns True on
a success that leaves the window healthy, False on a failure that leaves it unhealthy (reason
``RegistrationFailed`` when the instance launched, else the launch's own failure reason), and
Unknown (window emptied) when the NodePool's or its NodeClass's generation changes. After a
restart the window is seeded from the condition as it stands.
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW = 4
UNHEALTHY_SHARE = 0.5
TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


@dataclass(frozen=True, slots=True)
class History:
    """The last outcomes of a pool's launches, oldest first (True: registered)."""

    outcomes: tuple[bool, ...] = ()

    def record(self, registered: bool) -> History:
        """The window with one more outcome (the oldest drops out past ``WINDOW``)."""
        return History((*self.outcomes, registered)[-WINDOW:])

    @property
    def status(self) -> str:
        """``True``, ``False`` or ``Unknown``, as upstream's tracker computes it."""
        if not self.outcomes:
            return UNKNOWN
        failures = sum(1 for ok in self.outcomes if not ok)
        return FALSE if failures / WINDOW >= UNHEALTHY_SHARE else TRUE


def needs_reset(
    condition_generation: int | None,
    pool_generation: int | None,
    observed_class_generation: int | None,
    class_generation: int | None,
) -> bool:
    """Whether the condition goes back to Unknown (window emptied), as upstream resets it.

    ``condition_generation`` is the condition's ``observedGeneration`` (None: no condition
    yet); ``observed_class_generation`` is ``status.nodeClassObservedGeneration``, and
    ``class_generation`` the NodeClass's own (None: the provider has no NodeClass objects, so
    only edits of the NodePool count).
    """
    if condition_generation is None or condition_generation != pool_generation:
        return True
    return class_generation is not None and observed_class_generation != class_generation


def seeded(condition_status: str | None) -> History:
    """The window a restarted controller assumes from the stored condition."""
    if condition_status == TRUE:
        return History((True,))
    if condition_status == FALSE:
        return History((False,) * int(WINDOW * UNHEALTHY_SHARE))
    return History()


def transition(history: History, registered: bool, current: str | None) -> str | None:
    """The condition status to write after this outcome (None: leave it as it is)."""
    after = history.record(registered).status
    if registered and after == TRUE and current != TRUE:
        return TRUE
    if not registered and after == FALSE and current != FALSE:
        return FALSE
    return None
