"""Bursts still arriving: ReplicaSets that asked for more pods than the mirror holds yet.

The batch window closes one idle gap after the last pending pod showed up. A ReplicaSet scaled
from 0 to 500 creates its pods in doubling batches, and on a busy control plane the creations
(or the watch delivering them) can pause for longer than that gap: the window then closed on
the first 366 of 1000 pods, the pass bought nodes for those, and the next pass packed the rest
around them (151 nodes instead of 140, 36 s instead of 27 s to Running).

The pods themselves do not say how many siblings are coming; their ReplicaSet does. While a
window is open, the provisioner asks this tracker about the ReplicaSets owning the window's
pods: their ``spec.replicas`` (read with a GET once per window each, at most ``MAX_LOOKUPS`` at
a time, so no informer holds every ReplicaSet of the cluster in memory: a burst's replicas are
set before its pods are created) against the active pods of theirs the mirror holds. A short
ReplicaSet keeps the window open, within the batcher's max window, while it is still creating
pods: one that created none for ``STALL_S`` (a quota or a webhook refusing its pods, a pod
evicted and not replaced yet) holds nothing. Upstream has no such hold.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import aiohttp

from karpenter.aio.clock import Clock
from karpenter.core.model.pod import Pod
from karpenter.kube import client as kc
from karpenter.kube import errors
from karpenter.state.cluster import ClusterState

STALL_S = 3.0  # a short ReplicaSet whose newest pod is older than this holds nothing
MAX_LOOKUPS = 16  # ReplicaSets read per refresh (a window of many workloads: the newest first)

Owner = tuple[str, str]  # (namespace, ReplicaSet name)
# (namespace, name) → spec.replicas, or None when the ReplicaSet is gone or unreadable
Lookup = Callable[[str, str], Awaitable[int | None]]


def replicaset_of(pod: Pod) -> Owner | None:
    """The ReplicaSet controlling ``pod``, if one does."""
    for owner in pod.owners:
        if owner.controller:
            return (pod.namespace, owner.name) if owner.kind == "ReplicaSet" else None
    return None


def kube_lookup(kube: kc.KubeClient) -> Lookup:
    """A ReplicaSet's ``spec.replicas`` read from the apiserver (None when it cannot be read:
    a hold is an optimisation, never a reason to stop provisioning)."""

    async def lookup(namespace: str, name: str) -> int | None:
        try:
            obj = await kube.get(kc.REPLICASETS, name, namespace)
        except (errors.ApiError, aiohttp.ClientError, OSError):
            return None
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        return replicas if isinstance(replicas, int) else None

    return lookup


@dataclass(slots=True)
class _Seen:
    replicas: int | None  # None: not found or unreadable (holds nothing)


class Bursts:
    """ReplicaSets of the open window's pods and whether one is still short of its pods."""

    def __init__(self, state: ClusterState, clock: Clock, lookup: Lookup) -> None:
        self.state = state
        self.clock = clock
        self.lookup = lookup
        self._seen: dict[Owner, _Seen] = {}
        self._owner_of: dict[str, Owner | None] = {}  # the window's pods → their ReplicaSet

    async def refresh(self, keys: Iterable[str]) -> None:
        """Read the replicas of the ReplicaSets owning the pods ``keys`` (the open window's)
        not read yet in this window; forget the others."""
        owners: dict[Owner, None] = {}
        for key in keys:
            if key not in self._owner_of:  # each pod of a window is looked at once
                pod = self.state.pods.get(key)
                self._owner_of[key] = replicaset_of(pod) if pod is not None else None
            owner = self._owner_of[key]
            if owner is not None:
                owners[owner] = None
        for gone in set(self._seen) - set(owners):
            del self._seen[gone]
        unread = [o for o in owners if o not in self._seen]
        for owner in unread[-MAX_LOOKUPS:]:
            self._seen[owner] = _Seen(await self.lookup(*owner))

    def tracks(self, key: str) -> bool:
        """Whether the pod ``key`` belongs to a ReplicaSet of the window (read, and found)."""
        pod = self.state.pods.get(key) if self._seen else None
        owner = replicaset_of(pod) if pod is not None else None
        entry = self._seen.get(owner) if owner is not None else None
        return entry is not None and entry.replicas is not None

    def arriving(self) -> bool:
        """Whether a ReplicaSet of the window has fewer active pods than its replicas and
        created one within ``STALL_S`` (creation times have whole seconds: one more is
        allowed)."""
        if not any(e.replicas for e in self._seen.values()):
            return False
        counts = dict.fromkeys(self._seen, 0)
        newest = dict.fromkeys(self._seen, 0.0)
        for pod in self.state.pods.values():
            owner = replicaset_of(pod) if pod.is_active() else None
            if owner in counts:
                counts[owner] += 1
                newest[owner] = max(newest[owner], pod.creation)
        now = self.clock.now()
        return any(
            entry.replicas is not None
            and counts[owner] < entry.replicas
            and now - newest[owner] < STALL_S + 1.0
            for owner, entry in self._seen.items()
        )

    def clear(self) -> None:
        """The window closed: the next one reads its ReplicaSets afresh."""
        self._seen.clear()
        self._owner_of.clear()
