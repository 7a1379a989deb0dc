"""The CapacityBuffers' virtual pods: what the buffer controller resolved, kept for every pass.

Upstream's ``state/virtualpods`` cache, here beside the mirror: the buffer controller writes a
buffer's virtual pods when it resolves it and removes them when the buffer goes or stops being
ready; the snapshot hands them to the core (``Cluster.virtual_pods``), so the provisioner's
pass and every disruption what-if read the same set without an API call. ``on_change`` tells
the mirror (its version moves, so a quiet disruption loop looks again).
"""

from __future__ import annotations

from collections.abc import Callable

from karpenter.core.model.pod import Pod


class VirtualPods:
    """Buffer key (``namespace/name``) → its virtual pods."""

    def __init__(self, on_change: Callable[[str], None]) -> None:
        self._pods: dict[str, tuple[Pod, ...]] = {}
        self._all: tuple[Pod, ...] = ()
        self._on_change = on_change
        # False until the buffer controller (when its gate is on) resolved every buffer once:
        # decisions wait for it, so a new leader never sees headroom as empty.
        self.warm = True

    def set(self, key: str, pods: tuple[Pod, ...]) -> bool:
        """Keep ``pods`` for buffer ``key`` (none: forget it); True when that changed them."""
        if self._pods.get(key, ()) == pods:
            return False
        if pods:
            self._pods[key] = pods
        else:
            self._pods.pop(key, None)
        self._all = tuple(p for k in sorted(self._pods) for p in self._pods[k])
        self._on_change(key)
        return True

    def of(self, key: str) -> tuple[Pod, ...]:
        """The virtual pods of buffer ``key``."""
        return self._pods.get(key, ())

    def all(self) -> tuple[Pod, ...]:
        """Every buffer's virtual pods, by buffer key."""
        return self._all
