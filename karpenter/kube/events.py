"""Kubernetes Events: what Karpenter tells users on their objects (``kubectl describe``).

Events are core/v1 Events from component ``karpenter``. Like upstream's recorder, an identical
event (same object, reason and message) is not posted again within the dedupe window (2 min
by default; FailedScheduling uses 5 min), so a pod retried every pass does not flood the
apiserver. Failing to post an Event never fails the caller: it is logged and dropped.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import aiohttp
import structlog

from karpenter.aio.clock import Clock
from karpenter.kube import codec, errors
from karpenter.kube.client import EVENTS, KubeClient

NORMAL = "Normal"
WARNING = "Warning"
COMPONENT = "karpenter"
DEFAULT_DEDUPE_S = 120.0


class EventRecorder:
    """Posts Events, deduplicated per (object uid, reason, message)."""

    def __init__(self, client: KubeClient, clock: Clock) -> None:
        self.client = client
        self.clock = clock
        self._recent: dict[tuple[str, str, str], float] = {}
        self._log = structlog.get_logger()

    async def publish(
        self,
        involved: Mapping[str, Any],
        event_type: str,
        reason: str,
        message: str,
        *,
        dedupe_s: float = DEFAULT_DEDUPE_S,
    ) -> bool:
        """Post one Event about ``involved`` (an ObjectReference); False when deduplicated."""
        now = self.clock.now()
        key = (str(involved.get("uid") or involved.get("name")), reason, message)
        last = self._recent.get(key)
        if last is not None and now - last < dedupe_s:
            return False
        self._recent[key] = now
        if len(self._recent) > 10_000:
            self._recent = {k: t for k, t in self._recent.items() if now - t < dedupe_s}
        namespace = str(involved.get("namespace") or "default")
        stamp = codec.rfc3339(now)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.get('name', 'object')}.{secrets.token_hex(8)}",
                "namespace": namespace,
            },
            "involvedObject": dict(involved),
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self.client.create(EVENTS, body, namespace)
        except (errors.ApiError, aiohttp.ClientError, OSError) as err:
            self._log.warning("event not posted", reason=reason, error=str(err))
            return False
        return True
