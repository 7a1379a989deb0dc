"""Leader election: at most one controller replica acts, holding a coordination.k8s.io Lease.

The protocol is client-go's ``leaderelection`` with a Lease lock, written for anyio:

* A candidate reads the Lease (creating it when absent) and takes it when nobody holds it or
  the holder's record has not changed for ``leaseDurationSeconds`` *as timed on the candidate's
  own clock from when it first saw that record*. Timing from our own observation rather than
  from the holder's ``renewTime`` keeps clock skew between nodes from shortening a lease.
* Every write carries the ``resourceVersion`` that was read, so two candidates racing for the
  same expired Lease cannot both win: the apiserver answers the loser with 409 Conflict.
* The leader renews every ``retry_period``. If it cannot renew for ``renew_deadline`` (shorter
  than the lease duration) it stops leading *before* any other candidate can consider the lease
  expired, and ``run`` raises ``LeaderElectionLost`` so the process exits, as upstream does.
* On a clean shutdown the leader clears ``holderIdentity`` so a successor starts at once.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import anyio

from karpenter.aio.clock import Clock
from karpenter.kube import errors
from karpenter.kube.client import LEASES, KubeClient, Obj
from karpenter.observability.logging import get_logger

_RELEASE_TIMEOUT_S = 5.0  # a shutdown must not hang on an unreachable apiserver


class LeaderElectionLost(RuntimeError):
    """The lease could not be renewed in time, or another candidate took it."""


class _Outcome(enum.Enum):
    HOLDING = "holding"  # we hold the lease now
    HELD_ELSEWHERE = "held-elsewhere"  # another candidate holds an unexpired lease
    FAILED = "failed"  # the attempt failed (conflict, apiserver error); try again


def _micro_time(seconds: float) -> str:
    # MicroTime wants exactly six fractional digits; datetime.isoformat drops them at .000000
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity`` and leads while holding it."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        clock: Clock,
        release_on_cancel: bool = True,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "leader election needs lease_duration > renew_deadline > retry_period > 0, got "
                f"{lease_duration}, {renew_deadline}, {retry_period}"
            )
        self._kube = kube
        self._namespace, self._name, self._identity = namespace, name, identity
        self._lease_duration, self._renew_deadline = lease_duration, renew_deadline
        self._retry_period, self._clock = retry_period, clock
        self._release_on_cancel = release_on_cancel
        self._log = get_logger("leader-election").bind(
            lease=f"{namespace}/{name}", identity=identity
        )
        self._leader = False
        self._observed_version: str | None = None  # resourceVersion of the record we last saw
        self._observed_at = 0.0  # our clock when that record first appeared to us
        self._held: Obj | None = None  # the Lease as we last wrote it (renewals, release)

    @property
    def is_leader(self) -> bool:
        """True while this candidate holds the lease and ``lead`` is running."""
        return self._leader

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Acquire the lease, run ``lead`` while holding it, release it when ``lead`` ends.

        Returns when ``lead`` returns; raises ``LeaderElectionLost`` (after cancelling ``lead``)
        when the lease is lost. Cancelling ``run`` cancels ``lead`` and releases the lease.
        """
        lost: list[str] = []
        try:
            await self._acquire()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep_renewing, tg.cancel_scope, lost)
                await lead()
                tg.cancel_scope.cancel()  # lead finished: stop renewing, then release below
        finally:
            self._leader = False
            if not lost and self._release_on_cancel:
                with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_TIMEOUT_S):
                    await self._release()
        if lost:
            raise LeaderElectionLost(lost[0])

    async def _acquire(self) -> None:
        self._log.info("attempting to acquire leader lease")
        while await self._try_acquire_or_renew() is not _Outcome.HOLDING:
            await self._clock.sleep(self._retry_period)
        self._leader = True
        self._log.info("successfully acquired lease")

    async def _keep_renewing(self, scope: anyio.CancelScope, lost: list[str]) -> None:
        last_renewed = self._clock.now()
        while True:
            await self._clock.sleep(self._retry_period)
            # the deadline counts from before the request: the write may land any time after
            attempt_started = self._clock.now()
            outcome = _Outcome.FAILED  # stays so if the apiserver does not answer in time
            with anyio.move_on_after(self._renew_deadline):
                outcome = await self._try_acquire_or_renew()
            if outcome is _Outcome.HOLDING:
                last_renewed = attempt_started
                continue
            if outcome is _Outcome.HELD_ELSEWHERE:
                reason = "another candidate holds the lease"
            elif self._clock.now() - last_renewed >= self._renew_deadline:
                reason = f"failed to renew the lease within {self._renew_deadline}s"
            else:
                continue
            # stop leading before anyone else may take over; the caller raises once lead is gone
            self._leader = False
            self._log.error("leader election lost", reason=reason)
            lost.append(reason)
            scope.cancel()
            return

    async def _try_acquire_or_renew(self) -> _Outcome:
        try:
            return await self._attempt()
        except errors.Conflict:
            return _Outcome.FAILED  # someone wrote first; re-read next time
        except errors.ApiError as err:
            self._log.warning("lease update failed", status=err.status, reason=str(err))
            return _Outcome.FAILED
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            self._log.warning("lease update failed", error=repr(err))
            return _Outcome.FAILED

    async def _attempt(self) -> _Outcome:
        now = self._clock.now()
        try:
            lease = await self._kube.get(LEASES, self._name, self._namespace)
        except errors.NotFound:
            body = self._body(now, None, transitions=0)
            self._held = await self._kube.create(LEASES, body, self._namespace)
            return _Outcome.HOLDING
        version = _version(lease)
        if version != self._observed_version:
            self._observed_version, self._observed_at = version, now
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        expires = self._observed_at + int(spec.get("leaseDurationSeconds") or 0)
        if holder not in ("", self._identity) and now < expires:
            return _Outcome.HELD_ELSEWHERE
        transitions = int(spec.get("leaseTransitions") or 0)
        acquired_at = _parse_micro(spec.get("acquireTime"))
        keep_acquire = holder == self._identity and acquired_at is not None
        acquired = acquired_at if keep_acquire and acquired_at is not None else now
        body = self._body(now, lease, transitions=transitions + (holder != self._identity))
        body["spec"]["acquireTime"] = _micro_time(acquired)
        self._held = await self._kube.replace(LEASES, self._name, body, self._namespace)
        self._observed_version, self._observed_at = _version(self._held), now
        return _Outcome.HOLDING

    def _body(self, now: float, current: Obj | None, *, transitions: int) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self._name, "namespace": self._namespace}
        if current is not None:
            # keep labels and annotations others put on the Lease; the version makes it a CAS
            meta = current.get("metadata") or {}
            metadata["resourceVersion"] = meta.get("resourceVersion")
            metadata["labels"] = meta.get("labels")
            metadata["annotations"] = meta.get("annotations")
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self._identity,
                "leaseDurationSeconds": math.ceil(self._lease_duration),
                "acquireTime": _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": transitions,
            },
        }

    async def _release(self) -> None:
        held = self._held
        spec = (held or {}).get("spec") or {}
        if held is None or spec.get("holderIdentity") != self._identity:
            return
        now = self._clock.now()
        body = self._body(now, held, transitions=int(spec.get("leaseTransitions") or 0))
        body["spec"]["holderIdentity"] = None
        body["spec"]["leaseDurationSeconds"] = 1
        try:
            await self._kube.replace(LEASES, self._name, body, self._namespace)
        except (errors.ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
            # a conflict means someone else already wrote the lease; nothing left to release
            self._log.warning("lease release failed", error=repr(err))
            return
        self._held = None
        self._log.info("released leader lease")


def _version(lease: Obj) -> str:
    return str((lease.get("metadata") or {}).get("resourceVersion") or "")


def _parse_micro(value: Any) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
