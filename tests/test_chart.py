"""Helm chart: lints, renders upstream's env names, RBAC for leases, and ships config/crd as is.

helm itself renders the templates (built from the Go module proxy by hack/install-helm.sh and
cached), so these tests see exactly what `helm install` would apply.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from karpenter.api import schedulerconfig
from karpenter.providers.aws.settings import AWSSettings
from karpenter.settings import Settings
from tests.support.helm import CHART, ROOT, helm_binary, render


@pytest.fixture(scope="session")
def helm() -> str:
    """Path to a cached helm binary."""
    return helm_binary()


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return doc


def container_env(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e for e in container["env"]}


def test_lint_is_clean(helm: str) -> None:
    """`helm lint --strict` passes."""
    done = subprocess.run(
        [helm, "lint", "--strict", str(CHART)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_renders_every_object(helm: str) -> None:
    """The chart renders the controller's Deployment and everything around it."""
    kinds = sorted(d["kind"] for d in render(helm))
    assert kinds == sorted(
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "Role", "Role",
         "RoleBinding", "RoleBinding", "RoleBinding", "Service", "PodDisruptionBudget",
         "Deployment"]
    )  # fmt: skip


def test_deployment_env_uses_upstream_names_and_parses(
    helm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env carries upstream's variables, and every literal value is valid for Settings."""
    env = container_env(render(helm))
    for name in ("BATCH_MAX_DURATION", "BATCH_IDLE_DURATION", "FEATURE_GATES", "LOG_LEVEL",
                 "METRICS_PORT", "HEALTH_PROBE_PORT", "DISABLE_LEADER_ELECTION",
                 "LEADER_ELECTION_NAME", "SYSTEM_NAMESPACE", "MEMORY_LIMIT", "CPU_REQUESTS",
                 "KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST", "KARPENTER_SERVICE"):  # fmt: skip
        assert name in env, name
    assert env["SYSTEM_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["MEMORY_LIMIT"]["valueFrom"]["resourceFieldRef"]["resource"] == "limits.memory"
    assert "CLUSTER_NAME" not in env  # unset settings stay unset
    for name, entry in env.items():
        if "value" in entry:
            monkeypatch.setenv(name, entry["value"])
    settings = Settings()
    assert settings.LEADER_ELECTION_NAME == "karpenter-leader-election"
    assert settings.feature_gates["ReservedCapacity"] and not settings.feature_gates["NodeRepair"]
    assert (settings.METRICS_PORT, settings.HEALTH_PROBE_PORT) == (8080, 8081)
    assert settings.log_json
    assert env["AWS_FEATURE_GATES"]["value"] == "NodeClassCEL=false"
    assert AWSSettings().aws_feature_gates == {"NodeClassCEL": False}
    # `karpenter run` picks the cloud from this variable (see cli.py).
    assert env["KARPENTER_CLOUD_PROVIDER"]["value"] == "aws"
    simulated = container_env(render(helm, "cloudProvider=simulated"))
    assert simulated["KARPENTER_CLOUD_PROVIDER"]["value"] == "simulated"


def test_values_reach_the_env(helm: str) -> None:
    """Overridden values change the matching variables and the image reference."""
    docs = render(
        helm,
        "settings.clusterName=prod",
        "logLevel=debug",
        "settings.featureGates.nodeOverlay=true",
        "settings.awsFeatureGates.nodeClassCEL=true",
        "settings.interruptionQueue=prod-q",
        "controller.image.digest=sha256:abc",
    )
    env = container_env(docs)
    assert env["CLUSTER_NAME"]["value"] == "prod"
    assert env["INTERRUPTION_QUEUE"]["value"] == "prod-q"
    assert env["LOG_LEVEL"]["value"] == "debug"
    assert "NodeOverlay=true" in env["FEATURE_GATES"]["value"].split(",")
    assert env["AWS_FEATURE_GATES"]["value"] == "NodeClassCEL=true"
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "karpenter-py@sha256:abc"


def test_scheduler_config_is_mounted_and_parses(
    helm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """settings.schedulerConfig becomes a ConfigMap file that SCHEDULER_CONFIG points at."""
    assert "SCHEDULER_CONFIG" not in container_env(render(helm))
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    value = json.dumps({"podTopologySpread": {"defaultConstraints": [constraint]}})
    docs = render(helm, json_sets=(f"settings.schedulerConfig={value}",))
    env = container_env(docs)
    path = Path(env["SCHEDULER_CONFIG"]["value"])
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "scheduler-config"]
    assert mount["mountPath"] == str(path.parent)
    [volume] = [v for v in pod["volumes"] if v["name"] == "scheduler-config"]
    config_map = one(docs, "ConfigMap", volume["configMap"]["name"])
    text = config_map["data"][path.name]
    # the file the controller reads holds exactly the constraints given
    (tmp_path / "config.yaml").write_text(text)
    [spread] = schedulerconfig.load(str(tmp_path / "config.yaml"))
    assert (spread.topology_key, spread.max_skew, spread.when_unsatisfiable) == (
        "topology.kubernetes.io/zone",
        1,
        "ScheduleAnyway",
    )


def test_probes_and_ports(helm: str) -> None:
    """Liveness hits /healthz and readiness /readyz on the health port; metrics has a Service."""
    docs = render(helm, "controller.metrics.port=9000")
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 9000, "http": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["securityContext"]["runAsUser"] == 65532
    [port] = one(docs, "Service")["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (9000, "http-metrics")
    pdb = one(docs, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1


def _verbs(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in rules
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_rbac_covers_what_the_controller_does(helm: str) -> None:
    """The ClusterRole grants the reads and writes the controllers make; leases are in a Role."""
    docs = render(helm)
    rules = one(docs, "ClusterRole")["rules"]
    reads = [
        ("", "pods"), ("", "nodes"), ("", "persistentvolumes"), ("", "persistentvolumeclaims"),
        ("apps", "daemonsets"), ("policy", "poddisruptionbudgets"),
        ("storage.k8s.io", "storageclasses"), ("storage.k8s.io", "csinodes"),
        ("karpenter.sh", "nodeoverlays"),
        # default topology spread deduces selectors from Services and pod controllers
        ("", "services"), ("", "replicationcontrollers"), ("apps", "replicasets"),
        ("apps", "statefulsets"),
        # the drain waits for VolumeAttachments of drained pods' volumes
        ("storage.k8s.io", "volumeattachments"),
    ]  # fmt: skip
    for group, resource in reads:
        assert {"get", "list", "watch"} <= _verbs(rules, group, resource), (group, resource)
    assert {"create", "patch", "delete"} <= _verbs(rules, "karpenter.sh", "nodeclaims")
    assert {"patch"} <= _verbs(rules, "karpenter.sh", "nodeclaims/status")
    assert {"patch"} <= _verbs(rules, "karpenter.sh", "nodepools/status")
    # least privilege (tests/faults/test_security.py): NodePools are never created or deleted
    assert not {"create", "delete"} & _verbs(rules, "karpenter.sh", "nodepools")
    assert "create" in _verbs(rules, "", "pods/eviction")
    assert "patch" in _verbs(rules, "", "pods/status")  # PublishNominations
    assert {"create", "patch"} <= _verbs(rules, "", "events")
    assert {"update", "delete"} <= _verbs(rules, "", "nodes")

    role = one(docs, "Role", "k-karpenter")
    assert role["metadata"]["namespace"] == "karpenter"
    lease_verbs = _verbs(role["rules"], "coordination.k8s.io", "leases")
    assert {"create", "get", "update"} <= lease_verbs
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named[0]["resourceNames"] == ["karpenter-leader-election"]
    assert not _verbs(rules, "coordination.k8s.io", "leases")  # no cluster-wide lease access
    node_leases = one(docs, "Role", "k-karpenter-lease")
    assert node_leases["metadata"]["namespace"] == "kube-node-lease"
    assert {"list", "watch", "delete"} <= _verbs(
        node_leases["rules"], "coordination.k8s.io", "leases"
    )
    binding = one(docs, "RoleBinding", "k-karpenter")
    assert binding["subjects"][0]["name"] == one(docs, "ServiceAccount")["metadata"]["name"]
    dns = one(docs, "Role", "k-karpenter-dns")  # only the kube-dns Service, only get
    assert dns["metadata"]["namespace"] == "kube-system"
    assert dns["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["services"],
            "resourceNames": ["kube-dns"],
            "verbs": ["get"],
        }
    ]
    assert one(docs, "RoleBinding", "k-karpenter-dns")["roleRef"]["name"] == "k-karpenter-dns"


@pytest.mark.parametrize(
    "crd", sorted(p.name for p in (ROOT / "config" / "crd").glob("*.yaml")), ids=str
)
def test_chart_crds_are_copies_of_config_crd(crd: str) -> None:
    """charts/karpenter/crds holds byte-identical copies of config/crd (one source of truth)."""
    assert (CHART / "crds" / crd).read_bytes() == (ROOT / "config" / "crd" / crd).read_bytes()


def test_chart_has_no_extra_crds() -> None:
    """Every CRD the chart ships comes from config/crd."""
    shipped = {p.name for p in (CHART / "crds").glob("*")}
    assert shipped == {p.name for p in (ROOT / "config" / "crd").glob("*.yaml")}


def test_existing_service_account(helm: str) -> None:
    """serviceAccount.create=false renders no ServiceAccount; bindings name the given one."""
    docs = render(helm, "serviceAccount.create=false", "serviceAccount.name=irsa-karpenter")
    assert "ServiceAccount" not in {d["kind"] for d in docs}
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "irsa-karpenter"
    for binding in (d for d in docs if d["kind"].endswith("Binding")):
        assert binding["subjects"][0]["name"] == "irsa-karpenter"


def test_dockerfile_runs_the_console_script_as_non_root() -> None:
    """The image runs pyproject's console script as a non-root uid, logging JSON."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'karpenter = "karpenter.cli:main"' in pyproject
    assert 'ENTRYPOINT ["karpenter"]' in lines
    assert 'CMD ["run"]' in lines
    assert lines[1] == "FROM python:3.11-slim"
    [user] = [line for line in lines if line.startswith("USER ")]
    assert not user.split()[1].startswith(("0", "root"))
    assert any("LOG_ENCODING=json" in line for line in lines)


def _cluster_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    [role] = [d for d in docs if d.get("kind") == "ClusterRole"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_simulated_cloud_gets_its_instance_records(helm: str) -> None:
    """With cloudProvider=simulated the ClusterRole lets the controller keep its instance
    records (ConfigMaps, and the namespace they live in); the AWS default does not grant it."""

    def grants(docs: list[dict[str, Any]], resource: str, verb: str) -> bool:
        return any(
            resource in r["resources"] and verb in r["verbs"] and r["apiGroups"] == [""]
            for r in _cluster_rules(docs)
        )

    simulated = render(helm, "cloudProvider=simulated")
    assert grants(simulated, "configmaps", "create")
    assert grants(simulated, "configmaps", "delete")
    assert grants(simulated, "namespaces", "create")
    default = render(helm)
    assert not grants(default, "configmaps", "create")
    assert not grants(default, "namespaces", "create")
