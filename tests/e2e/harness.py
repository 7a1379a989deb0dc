"""Helpers for controller e2e tests: run an Operator in-process, build objects, wait for things.

Each test runs the controller inside its own task (``running``), against the session's real
control plane, with a simulated cloud and short batch windows. Tests isolate themselves with
a NodePool whose taint only their own pods tolerate, in a namespace of their own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from karpenter.aio.clock import RealClock
from karpenter.controllers.context import ControllerContext
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model.instancetype import InstanceType
from karpenter.kube import client as kc
from karpenter.kube import codec, errors
from karpenter.operator import Operator
from karpenter.providers.simulated.plugin import SimulatedProvider
from karpenter.settings import Settings
from tests.support import context

WAIT_S = 60.0
POOL_KEY = "e2e.karpenter.test/pool"


async def eventually(probe: Callable[[], Awaitable[Any]], what: str, wait_s: float = WAIT_S) -> Any:
    """Poll ``probe`` until it returns something truthy."""
    deadline = time.monotonic() + wait_s
    while True:
        result = await probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {wait_s:.0f}s waiting for {what}")
        await anyio.sleep(0.1)


def settings(**overrides: Any) -> Settings:
    """Test settings: short batch windows, any free ports, no leader election by default."""
    values: dict[str, Any] = {
        "BATCH_IDLE_DURATION": "200ms",
        "BATCH_MAX_DURATION": "2s",
        "DISABLE_LEADER_ELECTION": True,
        "METRICS_PORT": 0,
        "HEALTH_PROBE_PORT": 0,
    }
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def running(
    kubeconfig: Path,
    *,
    catalog_size: int = 8,
    identity: str = "",
    disruption_timing: tuple[float, float] = (10.0, 15.0),
    types: Sequence[InstanceType] | None = None,
    **overrides: Any,
) -> AsyncIterator[Operator]:
    """An Operator with a simulated cloud (``types``, else the fake catalog), running until the
    block exits (built as ``karpenter run`` builds it: a host, the provider opened on it, one
    controller context)."""
    clock = RealClock()
    async with kc.connect(kubeconfig) as kube:
        base = context.host(kube, clock, settings=settings(**overrides))
        catalog = tuple(types) if types is not None else fake_instance_types(catalog_size)
        provider = SimulatedProvider(catalog)
        async with provider.open(base) as plugin:
            op = Operator(
                ControllerContext.of(base, plugin),
                services=plugin.services,
                identity=identity,
                disruption_timing=disruption_timing,
            )
            async with anyio.create_task_group() as tg:
                await tg.start(op.run)
                yield op
                tg.cancel_scope.cancel()


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def nodepool(
    name: str,
    requirements: list[dict[str, Any]] | None = None,
    *,
    group: str = "",
    weight: int | None = None,
) -> dict[str, Any]:
    """A NodePool whose nodes carry a taint only this test's pods tolerate.

    Pools sharing a ``group`` share label and taint, so one set of pods can use all of them.
    """
    group = group or name
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {POOL_KEY: group}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.test",
                        "kind": "SimNodeClass",
                        "name": "x",
                    },
                    "requirements": requirements or [],
                    "taints": [{"key": POOL_KEY, "value": group, "effect": "NoSchedule"}],
                    "expireAfter": "Never",
                },
            },
            "disruption": {"consolidateAfter": "Never"},
        },
    }
    if weight is not None:
        body["spec"]["weight"] = weight
    return body


def pod(
    name: str, pool: str, cpu: str = "500m", selector: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A pod that tolerates ``pool``'s taint and selects its nodes."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "e2e"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
            ],
            "tolerations": [{"key": POOL_KEY, "operator": "Equal", "value": pool}],
            # both ways isolated: only this pool's nodes, and only this test's pods on them
            "nodeSelector": {POOL_KEY: pool, **(selector or {})},
            "terminationGracePeriodSeconds": 0,
        },
    }


async def namespace(kube: kc.KubeClient) -> str:
    """A fresh namespace."""
    name = unique("e2e")
    await kube.create(
        kc.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


async def claims_of(kube: kc.KubeClient, pool: str) -> list[dict[str, Any]]:
    """The NodeClaims of one NodePool."""
    items, _ = await kube.list(kc.NODECLAIMS, label_selector=f"karpenter.sh/nodepool={pool}")
    return items


async def cleanup(kube: kc.KubeClient, pool: str, ns: str) -> None:
    """Delete the namespace and the pool, then its NodeClaims (finalized by the running
    controller). The pool goes first so no new claim can be made for a pod still terminating."""
    await kube.delete(kc.NAMESPACES, ns)
    try:
        await kube.delete(kc.NODEPOOLS, pool)
    except errors.NotFound:
        pass

    async def gone() -> bool:
        claims = await claims_of(kube, pool)
        for claim in claims:
            try:
                await kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])
            except errors.NotFound:
                pass
        return not claims

    await eventually(gone, f"NodeClaims of {pool} to be finalized")


async def mark_not_ready(kube: kc.KubeClient, node: str, reason: str, message: str) -> None:
    """Report the Node ``Ready=False`` from now on, as a kubelet (or its absence) would."""
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": codec.rfc3339(RealClock().now()),
    }
    await kube.merge_patch(
        kc.NODES, node, {"status": {"conditions": [condition]}}, subresource="status"
    )
