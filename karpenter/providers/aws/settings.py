"""AWS provider settings: upstream's AWS options (pkg/operator/options), read from the environment.

Kept apart from the generic ``karpenter.settings``: only the AWS provider reads them.
CLUSTER_NAME and AWS_REGION are shared with the generic settings and read from the same
environment.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from karpenter.settings import parse_duration, parse_gate_pairs

DEFAULT_AWS_FEATURE_GATES = {"NodeClassCEL": False}


def parse_aws_feature_gates(text: str) -> dict[str, bool]:
    """``AWS_FEATURE_GATES`` (``NodeClassCEL=true``) over its defaults; unknown gates refused."""
    gates = parse_gate_pairs(text)
    unknown = sorted(set(gates) - set(DEFAULT_AWS_FEATURE_GATES))
    if unknown:
        raise ValueError(f"unrecognized AWS feature gate {unknown[0]!r} (known: NodeClassCEL)")
    return {**DEFAULT_AWS_FEATURE_GATES, **gates}


class AWSSettings(BaseSettings):
    """AWS provider settings with upstream's names and defaults (immutable once read)."""

    model_config = SettingsConfigDict(frozen=True, case_sensitive=True, extra="ignore")

    CLUSTER_NAME: str = ""
    # "" → AWS_DEFAULT_REGION, then the instance metadata service (providers/aws/cloud/startup.py)
    AWS_REGION: str = ""
    CLUSTER_ENDPOINT: str = ""
    CLUSTER_CA_BUNDLE: str = ""
    ISOLATED_VPC: bool = False
    EKS_CONTROL_PLANE: bool = False
    VM_MEMORY_OVERHEAD_PERCENT: float = Field(default=0.075, ge=0)
    INTERRUPTION_QUEUE: str = ""
    RESERVED_ENIS: int = Field(default=0, ge=0)
    DISABLE_DRY_RUN: bool = False
    ENABLE_ZONAL_SHIFT: bool = False
    AMI_REFRESH_INTERVAL: str = "1m"
    SUBNET_REFRESH_INTERVAL: str = "1m"
    AWS_FEATURE_GATES: str = "NodeClassCEL=false"
    # Not upstream: the offline price source (see aws/core/pricing.py for the file layout).
    AWS_PRICE_FILE: str = ""

    @field_validator("CLUSTER_ENDPOINT")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        if value and not re.match(r"^[a-z][a-z0-9+.-]*://[^/]+", value):
            raise ValueError(f"{value!r} is not an absolute URL with a host")
        return value

    @field_validator("AWS_FEATURE_GATES")
    @classmethod
    def _aws_gates(cls, value: str) -> str:
        parse_aws_feature_gates(value)
        return value

    @property
    def aws_feature_gates(self) -> dict[str, bool]:
        """The parsed ``AWS_FEATURE_GATES``."""
        return parse_aws_feature_gates(self.AWS_FEATURE_GATES)

    @field_validator("AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL")
    @classmethod
    def _interval(cls, value: str) -> str:
        if parse_duration(value) < 60:
            raise ValueError(f"{value!r} is below the 1m minimum")
        return value

    @field_validator(
        "ISOLATED_VPC", "EKS_CONTROL_PLANE", "DISABLE_DRY_RUN", "ENABLE_ZONAL_SHIFT", mode="before"
    )
    @classmethod
    def _flag(cls, value: object) -> object:
        if isinstance(value, str) and value.lower() not in ("true", "false"):
            raise ValueError(f"invalid boolean {value!r} (true or false)")
        return value
