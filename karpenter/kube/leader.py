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
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from karpenter.aio.clock import Clock
from karpenter.observability.logging import get_logger

_CONFLICT, _NOT_FOUND = 409, 404
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
        api_client: client.ApiClient,
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
        self._api = client.CoordinationV1Api(api_client)
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
        self._held: Any = None  # the Lease as we last wrote it (for renewals and release)

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
        except ApiException as err:
            if err.status != _CONFLICT:
                self._log.warning("lease update failed", status=err.status, reason=err.reason)
            return _Outcome.FAILED  # a conflict means someone wrote first; re-read next time
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            self._log.warning("lease update failed", error=repr(err))
            return _Outcome.FAILED

    async def _attempt(self) -> _Outcome:
        now = self._clock.now()
        try:
            lease = await self._api.read_namespaced_lease(self._name, self._namespace)
        except ApiException as err:
            if err.status != _NOT_FOUND:
                raise
            self._held = await self._api.create_namespaced_lease(
                self._namespace, self._body(now, None, transitions=0)
            )
            return _Outcome.HOLDING
        version = lease.metadata.resource_version
        if version != self._observed_version:
            self._observed_version, self._observed_at = version, now
        spec = lease.spec
        holder = spec.holder_identity or ""
        expires = self._observed_at + (spec.lease_duration_seconds or 0)
        if holder not in ("", self._identity) and now < expires:
            return _Outcome.HELD_ELSEWHERE
        transitions = spec.lease_transitions or 0
        keep_acquire = holder == self._identity and spec.acquire_time is not None
        acquired = spec.acquire_time.timestamp() if keep_acquire else now
        body = self._body(now, lease, transitions=transitions + (holder != self._identity))
        body["spec"]["acquireTime"] = _micro_time(acquired)
        self._held = await self._api.replace_namespaced_lease(self._name, self._namespace, body)
        self._observed_version, self._observed_at = self._held.metadata.resource_version, now
        return _Outcome.HOLDING

    def _body(self, now: float, current: Any, *, transitions: int) -> Any:
        # a plain dict (the client sends dicts verbatim though typed for V1Lease): the typed
        # models would serialize MicroTime through isoformat (see _micro_time)
        metadata: dict[str, Any] = {"name": self._name, "namespace": self._namespace}
        if current is not None:
            # keep labels and annotations others put on the Lease; the version makes it a CAS
            metadata["resourceVersion"] = current.metadata.resource_version
            metadata["labels"] = current.metadata.labels
            metadata["annotations"] = current.metadata.annotations
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
        if self._held is None or self._held.spec.holder_identity != self._identity:
            return
        now = self._clock.now()
        body = self._body(now, self._held, transitions=self._held.spec.lease_transitions or 0)
        body["spec"]["holderIdentity"] = None
        body["spec"]["leaseDurationSeconds"] = 1
        try:
            await self._api.replace_namespaced_lease(self._name, self._namespace, body)
        except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as err:
            # a conflict means someone else already wrote the lease; nothing left to release
            self._log.warning("lease release failed", error=repr(err))
            return
        self._held = None
        self._log.info("released leader lease")
