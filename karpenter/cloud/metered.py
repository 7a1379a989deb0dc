"""A CloudProvider decorator recording upstream's cloud metrics around every call.

``karpenter_cloudprovider_duration_seconds{controller,method,provider}`` observes each call and
``karpenter_cloudprovider_errors_total{controller,method,provider,error}`` counts failures by
error class. Each controller gets its own wrapper so the ``controller`` label says who called.
NodeClaimNotFound from ``delete``/``get`` is the port's normal "it is gone" answer, but it is
still counted, as upstream counts every returned error.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from karpenter.cloud.provider import CloudProvider
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.repair import RepairPolicy
from karpenter.observability.metrics import Metrics

T = TypeVar("T")


class MeteredCloud:
    """Implements CloudProvider by delegating to ``inner`` and recording metrics."""

    def __init__(self, inner: CloudProvider, metrics: Metrics, controller: str) -> None:
        self.inner = inner
        self.metrics = metrics
        self.controller = controller

    @property
    def name(self) -> str:
        """The wrapped provider's name."""
        return self.inner.name

    async def _call(self, method: str, fn: Callable[[], Awaitable[T]]) -> T:
        labels = {"controller": self.controller, "method": method, "provider": self.inner.name}
        # a duration, not a timestamp: the monotonic counter is the right tool and is no clock
        # read in the injected-clock sense (nothing decides on it)
        started = time.perf_counter()
        try:
            return await fn()
        except Exception as err:
            self.metrics.cloudprovider_errors.labels(**labels, error=type(err).__name__).inc()
            raise
        finally:
            self.metrics.cloudprovider_duration.labels(**labels).observe(
                time.perf_counter() - started
            )

    async def create(self, claim: NodeClaim) -> NodeClaim:
        """Launch."""
        return await self._call("Create", lambda: self.inner.create(claim))

    async def delete(self, claim: NodeClaim) -> None:
        """Terminate."""
        await self._call("Delete", lambda: self.inner.delete(claim))

    async def get(self, provider_id: str) -> NodeClaim:
        """Look one instance up."""
        return await self._call("Get", lambda: self.inner.get(provider_id))

    async def list(self) -> list[NodeClaim]:
        """Every instance."""
        return await self._call("List", self.inner.list)

    async def instance_types(self, nodepool: NodePool) -> tuple[InstanceType, ...]:
        """Instance types of a NodePool."""
        return await self._call("GetInstanceTypes", lambda: self.inner.instance_types(nodepool))

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """The provider's repair policies (no API call: not metered)."""
        return self.inner.repair_policies()

    async def is_drifted(self, claim: NodeClaim) -> str:
        """Cloud-side drift."""
        return await self._call("IsDrifted", lambda: self.inner.is_drifted(claim))
