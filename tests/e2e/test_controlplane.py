"""Smoke tests of the local control plane: apiserver, real scheduler, restart keeping etcd data."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from bench.perf.schedqueue import SchedulerQueue, parse
from tests.e2e.conftest import ControlPlane, new_api_client

pytestmark = pytest.mark.e2e

_WAIT_S = 60.0


async def eventually(probe: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Poll `probe` until it returns a truthy value; the scheduler acts asynchronously."""
    deadline = time.monotonic() + _WAIT_S
    while True:
        result = await probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {_WAIT_S:.0f}s waiting for {what}")
        await asyncio.sleep(0.2)


def _pod(name: str, node_selector: dict[str, str], cpu: str = "100m") -> client.V1Pod:
    container = client.V1Container(
        name="app", image="pause", resources=client.V1ResourceRequirements(requests={"cpu": cpu})
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(node_selector=node_selector, containers=[container]),
    )


async def _new_namespace(core: client.CoreV1Api) -> str:
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    await core.create_namespace(body=client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def _scheduled_condition(pod: Any) -> Any:
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled":
            return cond
    return None


@pytest.mark.asyncio
async def test_apiserver_answers(control_plane: ControlPlane, api: client.ApiClient) -> None:
    version = await client.VersionApi(api).get_code()
    assert version.git_version == "v1.34.4"
    assert control_plane.server.startswith("https://127.0.0.1:")


@pytest.mark.asyncio
async def test_unschedulable_without_nodes_then_bound_to_a_fake_node(
    control_plane: ControlPlane, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    ns = await _new_namespace(core)
    node_name = f"fake-{uuid.uuid4().hex[:8]}"
    # The selector pins the pod to the node created below, so nodes made by other tests in this
    # session cannot take it.
    selector = {"e2e.karpenter.test/node": node_name}
    await core.create_namespaced_pod(ns, body=_pod("waiting", selector, cpu="1"))

    async def unschedulable() -> Any:
        pod = await core.read_namespaced_pod("waiting", ns)
        cond = _scheduled_condition(pod)
        return cond is not None and cond.status == "False" and cond.reason == "Unschedulable"

    await eventually(unschedulable, "PodScheduled=False/Unschedulable")
    # the perf harness's view of the scheduler's queue (its /metrics, open on loopback) counts
    # that failed attempt
    queue = SchedulerQueue(control_plane.local.scheduler_port, started=0.0)
    sample = parse(await asyncio.to_thread(queue.read), at=0.0)
    assert sample.failed >= 1
    assert set(sample.pending) == {"active", "backoff", "unschedulable"}

    labels = {"kubernetes.io/hostname": node_name, **selector}
    await core.create_node(
        body=client.V1Node(metadata=client.V1ObjectMeta(name=node_name, labels=labels))
    )
    # A (strategic merge) patch, not read-modify-replace: controller-manager controllers annotate
    # new nodes concurrently, which would make a replace fail with 409 Conflict.
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node"}
    await core.patch_node_status(
        node_name,
        {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}},
    )

    async def bound() -> Any:
        pod = await core.read_namespaced_pod("waiting", ns)
        return pod.spec.node_name

    assert await eventually(bound, "the scheduler to bind the pod") == node_name
    await core.delete_node(node_name)


@pytest.mark.asyncio
async def test_restart_apiserver_keeps_data_and_serves_watches(
    control_plane: ControlPlane,
) -> None:
    async with await new_api_client(control_plane.kubeconfig) as api:
        ns = await _new_namespace(client.CoreV1Api(api))

    await asyncio.to_thread(control_plane.local.restart_apiserver)

    async with await new_api_client(control_plane.kubeconfig) as api:
        core = client.CoreV1Api(api)
        assert (await core.read_namespace(ns)).metadata.name == ns  # etcd kept the data
        since = (await core.list_namespaced_config_map(ns)).metadata.resource_version
        cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="after-restart"))
        await core.create_namespaced_config_map(ns, cm)
        seen = []
        async with watch.Watch() as w:
            async for event in w.stream(
                core.list_namespaced_config_map, ns, resource_version=since, timeout_seconds=10
            ):
                seen.append((event["type"], event["object"].metadata.name))
                break
    assert seen == [("ADDED", "after-restart")]


@pytest.mark.asyncio
async def test_controller_manager_runs_deployments(api: client.ApiClient) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = await _new_namespace(core)
    labels = {"app": "web"}
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels),
        spec=client.V1PodSpec(containers=[client.V1Container(name="app", image="pause")]),
    )
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2, selector=client.V1LabelSelector(match_labels=labels), template=template
        ),
    )
    await apps.create_namespaced_deployment(ns, deployment)

    async def two_pods() -> Any:
        pods = await core.list_namespaced_pod(ns, label_selector="app=web")
        return len(pods.items) == 2

    # Deployment -> ReplicaSet -> Pods needs the deployment and replicaset controllers.
    await eventually(two_pods, "the controller-manager to create the Deployment's pods")
