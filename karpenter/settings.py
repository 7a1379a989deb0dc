"""Settings: the controller's (and simulator's) configuration from upstream's environment names.

Values come from environment variables with upstream Karpenter's names and defaults; invalid
values fail fast with the variable named. ``core_options`` turns them into the plain options
value the decision core takes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from karpenter.core.model.cluster import Options
from karpenter.core.model.duration import parse_go_duration

DEFAULT_FEATURE_GATES = {
    "NodeRepair": False,
    "ReservedCapacity": True,
    "SpotToSpotConsolidation": False,
    "NodeOverlay": False,
    "StaticCapacity": False,
    "CapacityBuffer": False,
    "ConsolidationRepack": True,  # not upstream: consolidation's repack method
    # not upstream: provision for pods the kube-scheduler has not judged 1 s after they appear
    "EarlyProvisioning": True,
    # not upstream: launch types that hold the mix of pods the kube-scheduler will bind there
    "MixingHedge": True,
    # not upstream: refuse consolidation commands whose evicted pods the kube-scheduler's
    # binding (its default scoring) would leave without a node, unless they still save more
    # than the nodes bought for those pods
    "StrandingCheck": True,
    # not upstream: tell the kube-scheduler where a pass placed each pod (nominatedNodeName)
    "PublishNominations": True,
}


def parse_duration(text: str) -> float:
    """A Go duration (``1s``, ``500ms``, ``1h30m``) in seconds."""
    return parse_go_duration(text)


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``A=true,B=false`` merged over the defaults."""
    return {**DEFAULT_FEATURE_GATES, **parse_gate_pairs(text)}


def parse_gate_pairs(text: str) -> dict[str, bool]:
    """``A=true,B=false`` as a dict, no defaults (a provider merges its own)."""
    gates = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false"):
            raise ValueError(f"invalid feature gate {item!r} (expected Name=true|false)")
        gates[name.strip()] = value.lower() == "true"
    return gates


def split_paths(text: str) -> list[str]:
    """A comma-separated list of log sinks (zap's output paths), blanks dropped."""
    return [p.strip() for p in text.split(",") if p.strip()]


class Settings(BaseSettings):
    """Controller settings (immutable once read)."""

    model_config = SettingsConfigDict(frozen=True, case_sensitive=True, extra="ignore")

    CLUSTER_NAME: str = ""
    AWS_REGION: str = "us-west-2"
    BATCH_MAX_DURATION: str = "10s"
    BATCH_IDLE_DURATION: str = "1s"
    PREFERENCE_POLICY: Literal["Respect", "Ignore"] = "Respect"
    MIN_VALUES_POLICY: Literal["Strict", "BestEffort"] = "Strict"
    FEATURE_GATES: str = ""
    LOG_LEVEL: Literal["debug", "info", "error", ""] = "info"
    METRICS_PORT: int = 8080
    HEALTH_PROBE_PORT: int = 8081
    KUBE_CLIENT_QPS: int = 200
    KUBE_CLIENT_BURST: int = 300
    DISABLE_LEADER_ELECTION: bool = False
    LEADER_ELECTION_NAME: str = "karpenter-leader-election"
    LEADER_ELECTION_NAMESPACE: str = ""
    CPU_REQUESTS: int = 1000
    MEMORY_LIMIT: int = -1
    # the controller's own namespace; upstream reads it from the pod (downward API)
    SYSTEM_NAMESPACE: str = "kube-system"
    KARPENTER_SERVICE: str = ""
    LOG_OUTPUT_PATHS: str = "stdout"
    LOG_ERROR_OUTPUT_PATHS: str = "stderr"
    # not upstream (zap's encoding came from a ConfigMap): json or console; unset picks console
    # when the logs go to a terminal and json otherwise (``log_json_for``)
    LOG_ENCODING: Literal["json", "console", ""] = ""
    ENABLE_PROFILING: bool = False
    DISABLE_CONTROLLER_WARMUP: bool = True
    DISABLE_CLUSTER_STATE_OBSERVABILITY: bool = False
    IGNORE_DRA_REQUESTS: bool = True
    # A file holding the kube-scheduler's default topology spread constraints (parsed and
    # checked at startup by karpenter.api.schedulerconfig); empty means none.
    SCHEDULER_CONFIG: str = ""
    # Not upstream: "optimal" repacks each pass's new NodeClaims into the cheapest mix of
    # instance types and lets consolidation replace nodes with several cheaper ones;
    # "firstfit" is upstream's behaviour (first-fit claims, one replacement per command).
    COST_POLICY: Literal["optimal", "firstfit"] = "optimal"
    # Not upstream: most replacements one consolidation command may launch under
    # COST_POLICY=optimal (1 keeps upstream's one-replacement rule).
    CONSOLIDATION_MAX_REPLACEMENTS: int = Field(default=10, ge=1)
    # Not upstream: the cost pass's work per provisioning pass, in solver steps (simplex
    # iterations, search and branch-and-bound nodes); past it the pass keeps what it found.
    COST_WORK_BUDGET: int = Field(default=200_000, ge=0)

    @field_validator("BATCH_MAX_DURATION", "BATCH_IDLE_DURATION")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value

    @field_validator(
        "DISABLE_LEADER_ELECTION",
        "ENABLE_PROFILING",
        "DISABLE_CONTROLLER_WARMUP",
        "DISABLE_CLUSTER_STATE_OBSERVABILITY",
        "IGNORE_DRA_REQUESTS",
        mode="before",
    )
    @classmethod
    def _bool(cls, value: object) -> object:
        # upstream's bool flags accept only true/false; pydantic would also take yes/on/1
        if isinstance(value, str) and value.lower() not in ("true", "false"):
            raise ValueError(f"invalid boolean {value!r} (true or false)")
        return value

    @field_validator("METRICS_PORT", "HEALTH_PROBE_PORT")
    @classmethod
    def _port(cls, value: int) -> int:
        if not 0 <= value <= 65535:
            raise ValueError(f"port {value} is outside 0-65535")
        return value

    @field_validator("KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"{value} must be positive")
        return value

    @field_validator("SYSTEM_NAMESPACE")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("LOG_OUTPUT_PATHS", "LOG_ERROR_OUTPUT_PATHS")
    @classmethod
    def _paths(cls, value: str) -> str:
        if not split_paths(value):
            raise ValueError("needs at least one path (stdout, stderr or a file)")
        return value

    @field_validator("CPU_REQUESTS")
    @classmethod
    def _cpu(cls, value: int) -> int:
        return value if value > 0 else 1000  # upstream: <= 0 means the default

    @field_validator("FEATURE_GATES")
    @classmethod
    def _gates(cls, value: str) -> str:
        parse_feature_gates(value)
        return value

    @property
    def feature_gates(self) -> dict[str, bool]:
        """Feature gates merged over upstream's defaults."""
        return parse_feature_gates(self.FEATURE_GATES)

    @property
    def leader_election_namespace(self) -> str:
        """Where the leader Lease lives: LEADER_ELECTION_NAMESPACE, else the controller's own."""
        return self.LEADER_ELECTION_NAMESPACE or self.SYSTEM_NAMESPACE

    @property
    def log_json(self) -> bool:
        """Whether logs are JSON lines when they do not go to a terminal."""
        return self.log_json_for(terminal=False)

    def log_json_for(self, *, terminal: bool) -> bool:
        """Whether logs are JSON lines: LOG_ENCODING when set, else JSON unless every log sink
        is a terminal (a person reading, who gets structlog's console renderer)."""
        if self.LOG_ENCODING:
            return self.LOG_ENCODING == "json"
        return not terminal

    @property
    def log_output_paths(self) -> list[str]:
        """LOG_OUTPUT_PATHS split on commas: ``stdout``, ``stderr`` or file paths."""
        return split_paths(self.LOG_OUTPUT_PATHS)

    @property
    def log_error_output_paths(self) -> list[str]:
        """LOG_ERROR_OUTPUT_PATHS split on commas."""
        return split_paths(self.LOG_ERROR_OUTPUT_PATHS)

    @property
    def batch_max_seconds(self) -> float:
        """BATCH_MAX_DURATION in seconds."""
        return parse_duration(self.BATCH_MAX_DURATION)

    @property
    def batch_idle_seconds(self) -> float:
        """BATCH_IDLE_DURATION in seconds."""
        return parse_duration(self.BATCH_IDLE_DURATION)

    def core_options(self) -> Options:
        """The options the decision core takes."""
        gates = self.feature_gates
        return Options(
            preference_policy=self.PREFERENCE_POLICY,
            min_values_policy=self.MIN_VALUES_POLICY,
            spot_to_spot_consolidation=gates["SpotToSpotConsolidation"],
            node_overlay=gates["NodeOverlay"],
            repack_consolidation=gates["ConsolidationRepack"],
            mixing_hedge=gates["MixingHedge"],
            stranding_check=gates["StrandingCheck"],
            cost_policy=self.COST_POLICY,
            cost_work=self.COST_WORK_BUDGET,
            max_replacements=(
                self.CONSOLIDATION_MAX_REPLACEMENTS if self.COST_POLICY == "optimal" else 1
            ),
        )


def describe_error(err: Exception) -> str:
    """One line naming each invalid variable and why."""
    if isinstance(err, ValidationError):
        parts = []
        for e in err.errors():
            name = ".".join(str(p) for p in e["loc"])
            parts.append(f"{name}: {e['msg'].removeprefix('Value error, ')}")
        return "; ".join(parts)
    return str(err)
