"""Settings: upstream's environment names and defaults, and one clear error per bad variable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from karpenter import settings as settings_mod
from karpenter.settings import Settings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no environment the settings are upstream's defaults."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name, raising=False)
    s = Settings()
    assert (s.batch_max_seconds, s.batch_idle_seconds) == (10.0, 1.0)
    assert (s.PREFERENCE_POLICY, s.MIN_VALUES_POLICY, s.LOG_LEVEL) == ("Respect", "Strict", "info")
    assert (s.METRICS_PORT, s.HEALTH_PROBE_PORT) == (8080, 8081)
    assert (s.KUBE_CLIENT_QPS, s.KUBE_CLIENT_BURST) == (200, 300)
    assert s.LEADER_ELECTION_NAME == "karpenter-leader-election"
    assert (s.CPU_REQUESTS, s.MEMORY_LIMIT, s.AWS_REGION) == (1000, -1, "us-west-2")
    assert s.DISABLE_LEADER_ELECTION is False
    assert s.feature_gates == settings_mod.DEFAULT_FEATURE_GATES
    assert (s.SYSTEM_NAMESPACE, s.leader_election_namespace) == ("kube-system", "kube-system")
    assert (s.log_output_paths, s.log_error_output_paths) == (["stdout"], ["stderr"])
    assert s.log_json
    assert (s.ENABLE_PROFILING, s.DISABLE_CLUSTER_STATE_OBSERVABILITY) == (False, False)
    assert (s.DISABLE_CONTROLLER_WARMUP, s.IGNORE_DRA_REQUESTS) == (True, True)
    assert s.KARPENTER_SERVICE == ""


@pytest.mark.parametrize(
    ("env", "check"),
    [
        pytest.param(
            {"FEATURE_GATES": "SpotToSpotConsolidation=true, NodeOverlay=true"},
            lambda s: (
                s.feature_gates["SpotToSpotConsolidation"]
                and s.feature_gates["NodeOverlay"]
                and s.feature_gates["ReservedCapacity"]
            ),
            id="gates-merge-over-defaults",
        ),
        pytest.param(
            {"FEATURE_GATES": "ReservedCapacity=false"},
            lambda s: not s.feature_gates["ReservedCapacity"],
            id="gate-turned-off",
        ),
        pytest.param(
            {"BATCH_IDLE_DURATION": "500ms", "BATCH_MAX_DURATION": "1m30s"},
            lambda s: s.batch_idle_seconds == 0.5 and s.batch_max_seconds == 90.0,
            id="go-durations",
        ),
        pytest.param({"CPU_REQUESTS": "0"}, lambda s: s.CPU_REQUESTS == 1000, id="cpu-zero"),
        pytest.param(
            {"DISABLE_LEADER_ELECTION": "true"},
            lambda s: s.DISABLE_LEADER_ELECTION,
            id="bool-true",
        ),
        pytest.param({"CLUSTER_NAME": "prod"}, lambda s: s.CLUSTER_NAME == "prod", id="cluster"),
        pytest.param({"LOG_LEVEL": ""}, lambda s: s.LOG_LEVEL == "", id="empty-log-level"),
        pytest.param(
            {"SYSTEM_NAMESPACE": "karpenter"},
            lambda s: s.leader_election_namespace == "karpenter",
            id="lease-in-system-namespace",
        ),
        pytest.param(
            {"SYSTEM_NAMESPACE": "karpenter", "LEADER_ELECTION_NAMESPACE": "leases"},
            lambda s: s.leader_election_namespace == "leases",
            id="lease-namespace-override",
        ),
        pytest.param(
            {"LOG_OUTPUT_PATHS": "stdout, /var/log/k.log,"},
            lambda s: s.log_output_paths == ["stdout", "/var/log/k.log"],
            id="log-paths",
        ),
        pytest.param({"LOG_ENCODING": "console"}, lambda s: not s.log_json, id="console-logs"),
        pytest.param(
            {"ENABLE_PROFILING": "true", "IGNORE_DRA_REQUESTS": "false"},
            lambda s: s.ENABLE_PROFILING and not s.IGNORE_DRA_REQUESTS,
            id="bools",
        ),
        pytest.param({"METRICS_PORT": "0"}, lambda s: s.METRICS_PORT == 0, id="any-free-port"),
    ],
)
def test_overrides(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], check: object) -> None:
    """Each environment variable overrides its default."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert callable(check)
    assert check(Settings())


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("PREFERENCE_POLICY", "Maybe", id="preference-policy"),
        pytest.param("MIN_VALUES_POLICY", "Loose", id="min-values-policy"),
        pytest.param("LOG_LEVEL", "trace", id="log-level"),
        pytest.param("BATCH_MAX_DURATION", "10 seconds", id="duration"),
        pytest.param("BATCH_IDLE_DURATION", "1d", id="duration-unit"),
        pytest.param("FEATURE_GATES", "NodeOverlay", id="gate-without-value"),
        pytest.param("FEATURE_GATES", "NodeOverlay=yes", id="gate-not-bool"),
        pytest.param("METRICS_PORT", "http", id="port"),
        pytest.param("DISABLE_LEADER_ELECTION", "yes", id="bool-only-true-false"),
        pytest.param("ENABLE_PROFILING", "1", id="profiling-bool"),
        pytest.param("HEALTH_PROBE_PORT", "70000", id="port-range"),
        pytest.param("KUBE_CLIENT_QPS", "0", id="qps-positive"),
        pytest.param("KUBE_CLIENT_BURST", "-1", id="burst-positive"),
        pytest.param("SYSTEM_NAMESPACE", "", id="namespace-empty"),
        pytest.param("LOG_OUTPUT_PATHS", " , ", id="no-log-paths"),
        pytest.param("LOG_ENCODING", "xml", id="log-encoding"),
        pytest.param("COST_POLICY", "cheapest", id="cost-policy"),
        pytest.param("CONSOLIDATION_MAX_REPLACEMENTS", "0", id="max-replacements"),
        pytest.param("COST_WORK_BUDGET", "-1", id="cost-work-budget"),
    ],
)
def test_invalid_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """An invalid value fails with a one-line message that names the variable."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as info:
        Settings()
    message = settings_mod.describe_error(info.value)
    assert message.startswith(f"{name}: ")
    assert "\n" not in message


def test_core_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """core_options carries the policies and the gates the decision core reads."""
    monkeypatch.setenv("PREFERENCE_POLICY", "Ignore")
    monkeypatch.setenv("MIN_VALUES_POLICY", "BestEffort")
    monkeypatch.setenv("FEATURE_GATES", "SpotToSpotConsolidation=true,NodeOverlay=true")
    options = Settings().core_options()
    assert options.preference_policy == "Ignore"
    assert options.min_values_policy == "BestEffort"
    assert options.spot_to_spot_consolidation and options.node_overlay
    assert options.mixing_hedge  # on unless turned off
    assert options.stranding_check  # on unless turned off
    monkeypatch.setenv("FEATURE_GATES", "MixingHedge=false")
    assert not Settings().core_options().mixing_hedge
    monkeypatch.setenv("FEATURE_GATES", "StrandingCheck=false")
    assert not Settings().core_options().stranding_check


@pytest.mark.parametrize(
    ("policy", "replacements", "expected"),
    [
        pytest.param(None, None, ("optimal", 10), id="defaults"),
        pytest.param("optimal", "3", ("optimal", 3), id="optimal"),
        pytest.param("firstfit", "3", ("firstfit", 1), id="firstfit-is-upstream"),
    ],
)
def test_cost_policy_options(
    monkeypatch: pytest.MonkeyPatch,
    policy: str | None,
    replacements: str | None,
    expected: tuple[str, int],
) -> None:
    """COST_POLICY reaches the core; firstfit also means one replacement per command."""
    for name, value in (("COST_POLICY", policy), ("CONSOLIDATION_MAX_REPLACEMENTS", replacements)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    options = Settings().core_options()
    assert (options.cost_policy, options.max_replacements) == expected


def test_cost_work_budget_reaches_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """COST_WORK_BUDGET is the core's cost pass work budget (default 200,000 units)."""
    monkeypatch.delenv("COST_WORK_BUDGET", raising=False)
    assert Settings().core_options().cost_work == 200_000
    monkeypatch.setenv("COST_WORK_BUDGET", "5000")
    assert Settings().core_options().cost_work == 5000


def test_frozen() -> None:
    """Settings are immutable once read."""
    s = Settings()
    with pytest.raises(ValidationError):
        s.LOG_LEVEL = "debug"
