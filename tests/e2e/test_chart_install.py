"""The chart on a real apiserver: its objects are accepted strictly, and its RBAC is enough.

The rendered objects are created with strict field validation (typos in the templates fail),
then the controller's ServiceAccount is impersonated: SelfSubjectAccessReviews check each
permission the controllers use, and a real LeaderElector campaigns with only the chart's Role.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
import pytest
import pytest_asyncio
from kubernetes_asyncio import client, utils
from kubernetes_asyncio.client.exceptions import ApiException

from karpenter.aio.clock import RealClock
from karpenter.kube import client as kc
from karpenter.kube import transport
from karpenter.kube.leader import LeaderElector
from tests.e2e.conftest import ControlPlane, new_api_client
from tests.support.helm import helm_binary, render

pytestmark = pytest.mark.e2e

# (verb, group, resource, namespace or "" for cluster-wide) the controllers need
NEEDED = [
    ("list", "", "pods", ""), ("watch", "", "nodes", ""), ("patch", "", "nodes", ""),
    ("delete", "", "nodes", ""), ("create", "", "pods/eviction", ""), ("delete", "", "pods", ""),
    ("create", "", "events", ""), ("list", "policy", "poddisruptionbudgets", ""),
    ("list", "apps", "daemonsets", ""), ("list", "storage.k8s.io", "storageclasses", ""),
    ("list", "storage.k8s.io", "csinodes", ""), ("list", "", "persistentvolumes", ""),
    ("list", "", "persistentvolumeclaims", ""), ("watch", "karpenter.sh", "nodepools", ""),
    ("list", "storage.k8s.io", "volumeattachments", ""), ("get", "", "persistentvolumeclaims", ""),
    ("patch", "karpenter.sh", "nodeclaims/status", ""), ("patch", "", "pods/status", ""),
    ("patch", "karpenter.k8s.aws", "ec2nodeclasses/status", ""),
    ("watch", "karpenter.k8s.aws", "ec2nodeclasses", ""),
    ("create", "karpenter.sh", "nodeclaims", ""), ("list", "karpenter.sh", "nodeoverlays", ""),
    ("get", "apiextensions.k8s.io", "customresourcedefinitions", ""),
    ("delete", "coordination.k8s.io", "leases", "kube-node-lease"),
]  # fmt: skip


@dataclass(frozen=True)
class Installed:
    namespace: str
    service_account: str


@pytest_asyncio.fixture
async def installed(api: client.ApiClient) -> AsyncIterator[Installed]:
    """The chart's objects created in a fresh namespace under a unique release name."""
    namespace = f"karpenter-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(
        body=client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
    )
    docs = render(helm_binary(), "replicas=0", namespace=namespace, release=namespace)
    for doc in docs:
        body: dict[str, Any] = doc
        await utils.create_from_dict(api, body, namespace=namespace, field_validation="Strict")
    [sa] = [d for d in docs if d["kind"] == "ServiceAccount"]
    yield Installed(namespace, sa["metadata"]["name"])
    rbac = client.RbacAuthorizationV1Api(api)
    for doc in docs:
        name = doc["metadata"]["name"]
        if doc["kind"] == "ClusterRole":
            await rbac.delete_cluster_role(name)
        elif doc["kind"] == "ClusterRoleBinding":
            await rbac.delete_cluster_role_binding(name)
        elif doc["metadata"].get("namespace") == "kube-node-lease":
            delete = getattr(
                rbac, f"delete_namespaced_{doc['kind'].lower().replace('binding', '_binding')}"
            )
            await delete(name, "kube-node-lease")
    await core.delete_namespace(namespace)


async def _as_service_account(
    control_plane: ControlPlane, installed: Installed
) -> client.ApiClient:
    api = await new_api_client(control_plane.kubeconfig)
    user = f"system:serviceaccount:{installed.namespace}:{installed.service_account}"
    api.set_default_header("Impersonate-User", user)
    return api


@pytest.mark.asyncio
async def test_service_account_has_what_the_controllers_use(
    control_plane: ControlPlane, installed: Installed
) -> None:
    """Every permission the controllers need is granted to the chart's ServiceAccount."""
    async with await _as_service_account(control_plane, installed) as api:
        authz = client.AuthorizationV1Api(api)
        denied = []
        for verb, group, resource, namespace in NEEDED:
            name, _, sub = resource.partition("/")
            attrs = client.V1ResourceAttributes(
                verb=verb, group=group, resource=name, subresource=sub or None,
                namespace=namespace or None,
            )  # fmt: skip
            review = await authz.create_self_subject_access_review(
                client.V1SelfSubjectAccessReview(
                    spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs)
                )
            )
            if not review.status.allowed:
                denied.append((verb, group, resource, namespace))
    assert denied == []


@pytest.mark.asyncio
async def test_leader_election_works_with_the_chart_role(
    control_plane: ControlPlane, installed: Installed
) -> None:
    """The ServiceAccount can campaign for karpenter-leader-election but touch no other lease."""
    led: list[bool] = []

    async def lead() -> None:
        led.append(True)

    user = f"system:serviceaccount:{installed.namespace}:{installed.service_account}"
    creds = transport.load(control_plane.kubeconfig)
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=creds.ssl), headers={"Impersonate-User": user}
        ) as http,
        await _as_service_account(control_plane, installed) as api,
    ):
        elector = LeaderElector(
            kc.KubeClient(http, creds), installed.namespace, "karpenter-leader-election",
            "pod-a", lease_duration=2, renew_deadline=1.5, retry_period=0.3, clock=RealClock(),
        )  # fmt: skip
        with anyio.fail_after(20):
            await elector.run(lead)
        coordination = client.CoordinationV1Api(api)
        lease = await coordination.read_namespaced_lease(
            "karpenter-leader-election", installed.namespace
        )
        with pytest.raises(ApiException) as denied:
            await coordination.read_namespaced_lease("someone-elses", installed.namespace)
    assert led == [True]
    assert lease.spec.holder_identity is None  # released on the way out
    assert denied.value.status == 403
