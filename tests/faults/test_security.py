"""Security (matrix item 7): least-privilege RBAC proven by the audit log, a non-root read-only
container, and no credential in any log line.

The chart is rendered and installed; the controller process (``--cloud-provider aws`` on moto)
authenticates with a token of the chart's ServiceAccount and does a full round: EC2NodeClass
resolved, a launch, registration, a drain with evictions, termination, leader election. The
audit log then lists every (verb, resource) the ServiceAccount used: each must be granted and
allowed, and every grant must have been used or carry a written reason below. The AWS keys,
the session token and the ServiceAccount token are canaries: no line the controller logged may
contain any of them.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from kubernetes_asyncio import client, utils

from karpenter.kube import client as kc
from karpenter.providers.aws.runtime.nodeclasses import EC2NODECLASSES
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane, new_api_client
from tests.faults import audit, crash
from tests.faults import aws as fa
from tests.faults.process import LEADING_LINE, REPO, Controller, base_env
from tests.support.helm import helm_binary, render

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

# Grants the exercise reaches on some runs only (whether the drain meets the namespace being
# deleted by the cleanup, whether a status write meets a conflict, is a race), so these are
# neither required used nor required unused.
USED_ON_SOME_RUNS = {
    ("delete", "", "pods"): "drain in a terminating namespace, or terminationGracePeriod expiry",
    ("get", "karpenter.sh", "nodepools"): "a NodePool status write that met a conflict re-reads",
    ("get", "karpenter.sh", "nodeclaims"): "a NodeClaim status write that met a conflict re-reads",
    ("get", "apps", "replicasets"): "a batch window with pods of a ReplicaSet reads its replicas"
    " (controllers/bursts.py), and SCHEDULER_CONFIG default spread reads pod owners",
}

# Grants a short run does not exercise, each with the reason it is in the chart.
UNUSED_BY_DESIGN = {
    ("create", "", "nodes"): "cloudProvider=simulated creates its Nodes (no kubelet)",
    ("update", "", "nodes"): "Node writes other than patch (finalizer release by update)",
    ("get", "", "pods"): "single-object reads happen on mirror misses only",
    ("get", "", "nodes"): "single-object reads on mirror misses",
    ("get", "", "namespaces"): "single-object reads on mirror misses",
    ("get", "", "persistentvolumes"): "volume topology on mirror misses",
    ("get", "", "persistentvolumeclaims"): "volume topology on mirror misses",
    ("get", "", "services"): "SCHEDULER_CONFIG default spread reads pods' Services",
    ("list", "", "services"): "SCHEDULER_CONFIG default spread",
    ("watch", "", "services"): "SCHEDULER_CONFIG default spread",
    ("get", "", "replicationcontrollers"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("list", "", "replicationcontrollers"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("watch", "", "replicationcontrollers"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("get", "apps", "daemonsets"): "single-object reads on mirror misses",
    ("get", "apps", "deployments"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("list", "apps", "deployments"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("watch", "apps", "deployments"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("list", "apps", "replicasets"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("watch", "apps", "replicasets"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("get", "apps", "statefulsets"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("list", "apps", "statefulsets"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("watch", "apps", "statefulsets"): "SCHEDULER_CONFIG default spread (pod owners)",
    ("get", "policy", "poddisruptionbudgets"): "single-object reads on mirror misses",
    ("get", "storage.k8s.io", "storageclasses"): "single-object reads on mirror misses",
    ("get", "storage.k8s.io", "csinodes"): "single-object reads on mirror misses",
    ("get", "storage.k8s.io", "volumeattachments"): "the drain waits for attachments",
    ("watch", "storage.k8s.io", "volumeattachments"): "the drain waits for attachments",
    ("get", "apiextensions.k8s.io", "customresourcedefinitions"): "CRD presence checks",
    ("list", "apiextensions.k8s.io", "customresourcedefinitions"): "CRD presence checks",
    ("watch", "apiextensions.k8s.io", "customresourcedefinitions"): "CRD presence checks",
    ("update", "karpenter.sh", "nodepools/status"): "status writes other than patch",
    ("update", "karpenter.sh", "nodeclaims"): "finalizer release by update",
    ("update", "karpenter.sh", "nodeclaims/status"): "status writes other than patch",
    ("get", "karpenter.sh", "nodeoverlays"): "NodeOverlay feature gate (off by default)",
    ("list", "karpenter.sh", "nodeoverlays"): "NodeOverlay feature gate (off by default)",
    ("watch", "karpenter.sh", "nodeoverlays"): "NodeOverlay feature gate (off by default)",
    ("get", "karpenter.k8s.aws", "ec2nodeclasses"): "single-object reads on mirror misses",
    ("update", "karpenter.k8s.aws", "ec2nodeclasses"): "finalizer release by update",
    ("update", "karpenter.k8s.aws", "ec2nodeclasses/status"): "status writes other than patch",
    ("patch", "", "events"): "event aggregation (series) patches",
    ("patch", "", "pods/status"): "PublishNominations: nothing is nominated while every pending "
    "pod is alike (this run's one Deployment)",
    ("watch", "coordination.k8s.io", "leases"): "leader election may watch its Lease",
    ("delete", "coordination.k8s.io", "leases"): "node repair deletes Node Leases (NodeRepair)",
    ("list", "coordination.k8s.io", "leases"): "node repair reads Node Leases (NodeRepair gate)",
    ("patch", "coordination.k8s.io", "leases"): "Lease writes other than update",
    ("get", "autoscaling.x-k8s.io", "capacitybuffers"): "CapacityBuffer gate (off by default)",
    ("list", "autoscaling.x-k8s.io", "capacitybuffers"): "CapacityBuffer gate (off by default)",
    ("watch", "autoscaling.x-k8s.io", "capacitybuffers"): "CapacityBuffer gate (off by default)",
    ("patch", "autoscaling.x-k8s.io", "capacitybuffers/status"): "CapacityBuffer gate (status)",
    ("update", "autoscaling.x-k8s.io", "capacitybuffers/status"): "CapacityBuffer gate (status)",
    ("get", "", "podtemplates"): "CapacityBuffer gate: a buffer's PodTemplate",
    ("list", "", "podtemplates"): "CapacityBuffer gate: a buffer's PodTemplate",
    ("watch", "", "podtemplates"): "CapacityBuffer gate: a buffer's PodTemplate",
    ("delete", "karpenter.sh", "nodeclaims"): "disruption, GC and interruption delete claims "
    "(in this run the test deleted them itself)",
}


def _grants(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(verb, group, resource) the chart's Roles and ClusterRoles grant."""
    out = set()
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    named = rule.get("resourceNames")
                    key = f"{resource}:{named[0]}" if named and resource == "services" else resource
                    out |= {(verb, group, key) for verb in rule.get("verbs", [])}
    return out


def _used(entries: list[audit.Entry]) -> tuple[set[tuple[str, str, str]], list[str]]:
    used, denied = set(), []
    for e in entries:
        resource = (
            "services:kube-dns" if e.resource == "services" and e.name == "kube-dns" else e.resource
        )
        if e.forbidden:
            denied.append(f"{e.verb} {e.group}/{resource} {e.namespace}/{e.name}")
        used.add((e.verb, e.group, resource))
    return used, denied


async def _install(api: client.ApiClient, ns: str) -> tuple[list[dict[str, Any]], str]:
    await client.CoreV1Api(api).create_namespace(
        body=client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
    )
    docs = render(helm_binary(), "replicas=0", namespace=ns, release=ns)
    for doc in docs:
        body: dict[str, Any] = doc
        await utils.create_from_dict(api, body, namespace=ns)
    [sa] = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
    return docs, sa


async def _token(api: client.ApiClient, ns: str, sa: str) -> str:
    body = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    answer = await client.CoreV1Api(api).create_namespaced_service_account_token(sa, ns, body)
    return str(answer.status.token)


def _kubeconfig(plane: ControlPlane, token: str, path: Path) -> Path:
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster["name"], "user": "sa"}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


async def _exercise(plane: ControlPlane, account: fa.Account) -> None:
    """NodeClass resolved, a launch, registration, a drain with evictions, termination."""
    c_pool, nodeclass = f"sec-{account.cluster}", f"sec-{account.cluster}"
    async with kc.connect(plane.kubeconfig) as kube, anyio.create_task_group() as tg:
        tg.start_soon(fa.NodeAgent(kube, account).run)
        await kube.create(EC2NODECLASSES, fa.nodeclass(account, nodeclass))
        await harness.eventually(lambda: crash._nodeclass_ready(kube, nodeclass), "Ready", 120)
        ns = await harness.namespace(kube)
        await kube.create(kc.NODEPOOLS, fa.nodepool(c_pool, nodeclass))
        await kube.create(kc.DEPLOYMENTS, crash.deployment(c_pool, 2), ns)

        async def bound() -> bool:
            pods, _ = await kube.list(kc.PODS, ns)
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        await harness.eventually(bound, "pods bound", 120)
        for claim in await harness.claims_of(kube, c_pool):  # a drain: evictions, termination
            await kube.delete(kc.NODECLAIMS, claim["metadata"]["name"])
        await harness.eventually(bound, "pods bound again after the drain", 120)
        await harness.cleanup(kube, c_pool, ns)
        await kube.delete(EC2NODECLASSES, nodeclass)
        tg.cancel_scope.cancel()


CANARIES = {
    "AWS_ACCESS_KEY_ID": "AKIACANARY7Q3ZK2PLMX",
    "AWS_SECRET_ACCESS_KEY": "canary/Secret+Key0nlyInEnv9f3e2d1c0b",
    "AWS_SESSION_TOKEN": "canary-session-token-4b1d9a7c",
}


@pytest.mark.asyncio
@pytest.mark.timeout(600)
async def test_chart_rbac_is_exactly_what_the_controller_uses_and_no_secret_is_logged(
    fault_plane: ControlPlane, moto_url: str, tmp_path: Path
) -> None:
    """Under the chart's ServiceAccount nothing is denied, every grant is used or explained,
    and no canary credential appears in any log line."""
    ns = f"karpenter-{uuid.uuid4().hex[:6]}"
    async with await new_api_client(fault_plane.kubeconfig) as api:
        docs, sa = await _install(api, ns)
        token = await _token(api, ns, sa)
    lease = next(
        d["rules"][1]["resourceNames"][0]
        for d in docs
        if d["kind"] == "Role" and d["metadata"]["name"] == ns
    )
    account = await fa.seed(moto_url, f"sec-{uuid.uuid4().hex[:6]}")
    kubeconfig = _kubeconfig(fault_plane, token, tmp_path / "sa.kubeconfig")
    env = base_env(
        **(fa.controller_env(account) | CANARIES),
        SYSTEM_NAMESPACE=ns,
        DISABLE_LEADER_ELECTION="false",
        LEADER_ELECTION_NAME=lease,
    )
    controller = Controller(
        ["--cloud-provider", "aws", "--kubeconfig", str(kubeconfig)], env, tmp_path / "sa.log"
    )
    controller.start()
    try:
        await anyio.to_thread.run_sync(controller.wait_for, LEADING_LINE)
        await _exercise(fault_plane, account)
    finally:
        controller.stop()
    user = f"system:serviceaccount:{ns}:{sa}"
    used, denied = _used(audit.read(fault_plane.local.audit_log, user=user))
    assert denied == [], denied
    granted = _grants(docs)
    assert used - granted == set()  # anything used was granted (else it would be denied)
    unexplained = sorted(granted - used - set(UNUSED_BY_DESIGN) - set(USED_ON_SOME_RUNS))
    assert unexplained == [], f"granted, never used, no reason written: {unexplained}"
    stale = sorted(set(UNUSED_BY_DESIGN) - (granted - used))
    assert set(USED_ON_SOME_RUNS) <= granted, "a path-dependent reason for a grant not granted"
    assert stale == [], f"reasons for grants that are used or not granted: {stale}"
    text = (tmp_path / "sa.log").read_text(errors="replace")
    for secret in (*CANARIES.values(), token):
        assert secret not in text
    assert controller.exits == [0]


def test_container_runs_non_root_with_a_read_only_root_filesystem() -> None:
    """The Dockerfile's USER is a numeric non-root uid and the chart's securityContext pins the
    same uid, a read-only root filesystem, no privilege escalation and no capabilities."""
    dockerfile = (REPO / "Dockerfile").read_text().splitlines()
    users = [line.split()[1] for line in dockerfile if line.startswith("USER ")]
    assert users and users[-1].split(":")[0].isdigit() and users[-1].split(":")[0] != "0"
    # nothing at run time writes next to the code (no .pyc, no caches in the image's root fs)
    assert any("PYTHONDONTWRITEBYTECODE=1" in line for line in dockerfile)
    docs = render(helm_binary())
    [deploy] = [d for d in docs if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    [container] = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert str(sc["runAsUser"]) == users[-1].split(":")[0]
