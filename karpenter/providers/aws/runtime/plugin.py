"""The AWS provider as ``karpenter run --cloud-provider aws`` starts it (through the registry).

``from_environment`` reads and checks the AWS settings before anything is configured (bad
input: ``ProviderConfigError``, exit 2); ``startup`` finds the region (``AWS_REGION``, the
SDK's default, then IMDS; ``StartupError``, exit 1); ``open`` binds the provider and its
controllers to the cluster (``compose.open_aws``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
from pydantic import ValidationError

from karpenter.cloud.plugin import Host, Plugin, ProviderConfigError
from karpenter.providers.aws.cloud import startup as aws_startup
from karpenter.providers.aws.runtime.compose import open_aws
from karpenter.providers.aws.settings import AWSSettings
from karpenter.settings import describe_error


@dataclass(frozen=True, slots=True)
class AWSProvider:
    """The AWS provider, its settings read and checked."""

    settings: AWSSettings

    @classmethod
    def from_environment(cls) -> AWSProvider:
        """The AWS settings from the environment; CLUSTER_NAME is required."""
        try:
            settings = AWSSettings()
        except (ValidationError, ValueError) as err:
            raise ProviderConfigError(f"invalid settings: {describe_error(err)}") from None
        if not settings.CLUSTER_NAME:
            raise ProviderConfigError(
                "invalid settings: CLUSTER_NAME: required with --cloud-provider aws"
            )
        return cls(settings)

    def startup(self) -> AWSProvider:
        """The provider with its region resolved (AWS_REGION, AWS_DEFAULT_REGION, IMDS)."""
        try:
            found = anyio.run(aws_startup.region, self.settings.AWS_REGION)
        except aws_startup.StartupError as err:
            raise ProviderConfigError(f"invalid settings: {err}") from None
        return AWSProvider(self.settings.model_copy(update={"AWS_REGION": found}))

    @contextlib.asynccontextmanager
    async def open(self, host: Host) -> AsyncIterator[Plugin]:
        """The AWS provider and its controllers bound to ``host``'s cluster."""
        async with open_aws(host, self.settings) as plugin:
            yield plugin
