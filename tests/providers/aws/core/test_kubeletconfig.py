"""spec.kubelet as an open map: strict decode, Karpenter's rules, the managed subset, families."""

from __future__ import annotations

import pytest

from karpenter.providers.aws.core import kubeletconfig


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param({}, "", id="empty"),
        pytest.param(
            {
                "maxPods": 110,
                "registryBurst": 20,
                "shutdownGracePeriod": "30s",
                "featureGates": {"Foo": True},
                "evictionSoft": {"memory.available": "5%"},
                "evictionSoftGracePeriod": {"memory.available": "1m30s"},
                "evictionHard": {"nodefs.available": "10%", "memory.available": "100Mi"},
                "kubeReserved": {"cpu": "100m"},
                "imageGCHighThresholdPercent": 85,
                "imageGCLowThresholdPercent": 80,
            },
            "",
            id="valid",
        ),
        pytest.param({"maxPods": "min(110, vcpus * 20)"}, "", id="max-pods-expression-shape"),
        pytest.param(
            {"registryBurstt": 20},
            'spec.kubelet: unknown field "registryBurstt"',
            id="unknown-field",
        ),
        pytest.param(
            {"port": "10250"},
            "spec.kubelet: json: cannot unmarshal string into Go struct field "
            "KubeletConfiguration.port of type int32",
            id="wrong-type",
        ),
        pytest.param(
            {"shutdownGracePeriod": "soon"},
            "spec.kubelet: time: invalid duration 'soon' in shutdownGracePeriod",
            id="bad-duration",
        ),
        pytest.param(
            {"registerWithTaints": [{"key": "a", "effect": "NoSchedule"}]},
            "spec.kubelet: registerWithTaints may not be set: Karpenter registers the taints",
            id="register-with-taints",
        ),
        pytest.param(
            {"kubeReserved": {"gpu": "1", "cpu": "-1"}},
            "spec.kubelet: valid keys for kubeReserved are ['cpu', 'memory', "
            "'ephemeral-storage', 'pid']; spec.kubelet: kubeReserved value cannot be a "
            "negative resource quantity",
            id="reserved-joined",
        ),
        pytest.param(
            {"evictionHard": {"memory.available": "120%"}},
            "spec.kubelet: evictionHard[memory.available] '120%' is not a percentage (0-100%) "
            "or a non-negative quantity",
            id="eviction-percent",
        ),
        pytest.param(
            {"evictionSoft": {"memory.available": "5%"}},
            "spec.kubelet: evictionSoft and evictionSoftGracePeriod must name the same signals",
            id="soft-without-grace",
        ),
        pytest.param(
            {"maxPods": -1, "imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60},
            "spec.kubelet: maxPods must be greater than or equal to 0; spec.kubelet: "
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            id="numbers",
        ),
    ],
)
def test_validate(config: dict[str, object], message: str) -> None:
    """Invalid kubelet configuration is reported prefixed by spec.kubelet and joined by '; '."""
    assert kubeletconfig.validate(config) == message


@pytest.mark.parametrize(
    ("family", "config", "message"),
    [
        pytest.param("AL2023", {"registryBurst": 20}, "", id="al2023-any"),
        pytest.param("Custom", {"registryBurst": 20}, "", id="custom-any"),
        pytest.param("AL2", {"maxPods": 20, "cpuCFSQuota": False}, "", id="al2-managed"),
        pytest.param(
            "AL2",
            {"registryBurst": 20, "failSwapOn": False},
            "spec.kubelet has fields not applied by the AL2 AMI family that would be silently "
            "dropped: failSwapOn, registryBurst",
            id="al2-unmanaged",
        ),
        pytest.param(
            "Bottlerocket",
            {"podsPerCore": 2},
            "spec.kubelet has fields not applied by the Bottlerocket AMI family that would be "
            "silently dropped: podsPerCore",
            id="bottlerocket-pods-per-core",
        ),
        pytest.param(
            "Windows2022",
            {"clusterDNS": ["10.0.0.10", "10.0.0.11"]},
            "spec.kubelet.clusterDNS has 2 entries; the Windows2022 AMI family applies only one",
            id="windows-two-dns",
        ),
    ],
)
def test_unsupported(family: str, config: dict[str, object], message: str) -> None:
    """Only AL2023 and Custom take fields Karpenter does not manage itself."""
    assert kubeletconfig.unsupported(config, family) == message


def test_managed_subset_and_expressions() -> None:
    """The managed subset is read from the map; expressions are recognised, not evaluated."""
    config: dict[str, object] = {
        "maxPods": "min(110, vcpus * 20)",
        "podsPerCore": 4,
        "kubeReserved": {"cpu": "max(60, vcpus * 30)", "memory": "1Gi"},
        "systemReserved": {"memory": "max_pods * 11"},
        "clusterDNS": ["10.0.0.10"],
        "registryBurst": 20,
    }
    got = kubeletconfig.managed(config)
    assert got.max_pods is None
    assert got.max_pods_expression == "min(110, vcpus * 20)"
    assert got.pods_per_core == 4
    assert got.kube_reserved == {"cpu": "max(60, vcpus * 30)", "memory": "1Gi"}
    assert got.cluster_dns == ("10.0.0.10",)
    assert kubeletconfig.expressions(config) == [
        ("maxPods", "min(110, vcpus * 20)"),
        ("kubeReserved.cpu", "max(60, vcpus * 30)"),
        ("systemReserved.memory", "max_pods * 11"),
    ]
    assert kubeletconfig.expressions({"maxPods": 10, "kubeReserved": {"cpu": "1"}}) == []
