"""Per-pass lookups behind default topology spread: Services and controller selectors.

The deduction itself is pure (``core.provisioning.defaultspread``); this object fetches what
it needs from the apiserver, once per namespace and once per owner within one provisioning
pass, because a pass can hold thousands of pods from a handful of workloads. Lookups that
fail are logged and treated as empty, as the kube-scheduler treats its lister errors: a
transient API error must not stop provisioning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from karpenter.api import kube as decode
from karpenter.api.errors import DecodeError
from karpenter.core.model.pod import Pod, TopologySpread
from karpenter.core.provisioning import defaultspread
from karpenter.core.scheduling.selectors import LabelSelector
from karpenter.kube import client as kc
from karpenter.kube import errors

_OWNER_RESOURCES = {
    "ReplicationController": kc.REPLICATIONCONTROLLERS,
    "ReplicaSet": kc.REPLICASETS,
    "StatefulSet": kc.STATEFULSETS,
}


class SpreadSelectors:
    """Deduces default-spread selectors for one pass (make a new one per pass)."""

    def __init__(self, kube: kc.KubeClient) -> None:
        self.kube = kube
        self._services: dict[str, list[Mapping[str, str] | None]] = {}
        self._owners: dict[tuple[str, str, str], LabelSelector | None] = {}
        self._log = structlog.get_logger().bind(controller="provisioner")

    async def apply(self, pods: Sequence[Pod], defaults: Sequence[TopologySpread]) -> list[Pod]:
        """The pods with the cluster defaults added where the kube-scheduler would add them."""
        if not defaults:
            return list(pods)
        selectors: dict[str, LabelSelector | None] = {}
        for pod in pods:
            if not pod.topology_spread:
                selectors[pod.key] = await self._selector(pod)
        return defaultspread.apply_defaults(pods, defaults, lambda p: selectors.get(p.key))

    async def _selector(self, pod: Pod) -> LabelSelector | None:
        services = await self._service_selectors(pod.namespace)
        owner = defaultspread.selector_owner(pod)
        owned = None
        if owner is not None:
            owned = await self._owner_selector(pod.namespace, owner.kind, owner.name)
        return defaultspread.deduce_selector(pod, services, owned)

    async def _service_selectors(self, namespace: str) -> list[Mapping[str, str] | None]:
        if namespace not in self._services:
            try:
                items, _ = await self.kube.list(kc.SERVICES, namespace)
            except errors.ApiError as err:
                self._log.warning(
                    "ignoring services for default spread", namespace=namespace, error=str(err)
                )
                items = []
            self._services[namespace] = [_service_selector(s) for s in items]
        return self._services[namespace]

    async def _owner_selector(self, namespace: str, kind: str, name: str) -> LabelSelector | None:
        key = (namespace, kind, name)
        if key not in self._owners:
            self._owners[key] = await self._fetch_owner(namespace, kind, name)
        return self._owners[key]

    async def _fetch_owner(self, namespace: str, kind: str, name: str) -> LabelSelector | None:
        try:
            obj = await self.kube.get(_OWNER_RESOURCES[kind], name, namespace)
        except errors.ApiError as err:
            # The owner may be gone while its pods linger; go on without its selector.
            self._log.warning(
                "ignoring pod owner for default spread",
                owner=f"{kind}/{namespace}/{name}",
                error=str(err),
            )
            return None
        selector: Any = (obj.get("spec") or {}).get("selector")
        try:
            if kind == "ReplicationController":
                # an equality-only map, not a LabelSelector
                labels = decode.map_of(selector, "spec.selector")
                return LabelSelector(tuple(sorted((str(k), str(v)) for k, v in labels.items())))
            return decode.label_selector(selector, "spec.selector")
        except DecodeError as err:
            self._log.warning(
                "ignoring malformed owner selector",
                owner=f"{kind}/{namespace}/{name}",
                error=str(err),
            )
            return None


def _service_selector(service: Mapping[str, Any]) -> Mapping[str, str] | None:
    selector = (service.get("spec") or {}).get("selector")
    if not isinstance(selector, Mapping):
        return None  # no selector: the Service selects nothing (an empty map selects all)
    return {str(k): str(v) for k, v in selector.items()}
