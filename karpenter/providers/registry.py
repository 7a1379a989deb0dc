"""The one registration point of the cloud providers: a name → its lazily imported entry.

``karpenter run --cloud-provider NAME`` (and ``karpenter sandbox``, always ``simulated``)
gets a ``Provider`` here: configuration read and checked (``ProviderConfigError``), blocking
look-ups done by ``startup``, and ``open(host)`` yielding the ``cloud.plugin.Plugin`` the
operator runs. ``simulate`` expands InstanceTypeCatalog presets here (``fake`` is the core's,
``aws`` the AWS provider's). Each provider is imported only when chosen, inside the function
that names it, so ``simulate`` never loads a provider's shell and ``karpenter run`` never
loads the other providers. Nothing else in the project imports a provider: an import-linter
contract per provider says so.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

from karpenter.api.simulation import CatalogSpec
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.catalogs.preset import PresetCatalog

if TYPE_CHECKING:  # types only: simulate reaches the presets without the shell's modules
    from karpenter.cloud.plugin import Host, Plugin


class Provider(Protocol):
    """A provider chosen by name, its configuration read and checked."""

    def startup(self) -> Provider:
        """The provider after blocking look-ups (e.g. its region); ProviderConfigError."""
        ...

    def open(self, host: Host) -> AbstractAsyncContextManager[Plugin]:
        """The provider opened on ``host``: its cloud, options, informers and services."""
        ...


def _simulated(flags: argparse.Namespace) -> Provider:
    from karpenter.providers.simulated.plugin import SimulatedProvider  # noqa: PLC0415 - lazy: only the chosen provider loads

    return SimulatedProvider.from_flags(flags)


def _aws(flags: argparse.Namespace) -> Provider:
    from karpenter.providers.aws.runtime.plugin import AWSProvider  # noqa: PLC0415 - lazy: only the chosen provider loads

    del flags  # configured from the environment, as upstream
    return AWSProvider.from_environment()


PROVIDERS: dict[str, Callable[[argparse.Namespace], Provider]] = {
    "simulated": _simulated,
    "aws": _aws,
}


def provider(name: str, flags: argparse.Namespace) -> Provider:
    """The provider called ``name`` configured from ``flags`` and its environment."""
    return PROVIDERS[name](flags)


def _fake_preset(spec: CatalogSpec) -> PresetCatalog:
    return PresetCatalog(fake_instance_types(spec.count))


def _aws_preset(spec: CatalogSpec) -> PresetCatalog:
    from karpenter.providers.aws import preset  # noqa: PLC0415 - lazy: the EC2 data loads only when asked for

    return preset.scenario_catalog(spec)


PRESETS: dict[str, Callable[[CatalogSpec], PresetCatalog]] = {
    "fake": _fake_preset,
    "aws": _aws_preset,
}


def catalog_preset(spec: CatalogSpec) -> PresetCatalog:
    """The instance types of an InstanceTypeCatalog document (CatalogError, one line)."""
    return PRESETS[spec.preset](spec)
