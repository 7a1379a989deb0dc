"""The provider registry: the one place naming providers and catalog presets."""

from __future__ import annotations

import argparse

import pytest

from karpenter import cli
from karpenter.api import simulation
from karpenter.cloud.plugin import ProviderConfigError
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.providers import registry
from karpenter.providers.simulated.plugin import SimulatedProvider


def test_presets_are_the_contract_presets() -> None:
    """Every catalog preset the simulate contract accepts has a registry entry, and no other."""
    assert set(registry.PRESETS) == set(simulation.PRESETS)


def test_cloud_provider_choices_come_from_the_registry() -> None:
    """`karpenter run --cloud-provider` refuses a name the registry does not know (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--cloud-provider", "acme"])
    assert exit_info.value.code == 2
    assert set(registry.PROVIDERS) == {"simulated", "aws"}


def test_fake_preset_is_the_core_catalog() -> None:
    """The fake preset expands to the core's fake catalog of the requested size, with no note."""
    got = registry.catalog_preset(simulation.CatalogSpec("fake", count=3))
    assert got.types == fake_instance_types(3)
    assert got.note == ""


def test_simulated_provider_reads_its_flags() -> None:
    """The simulated entry turns --catalog/--boot-delay into its configuration."""
    flags = argparse.Namespace(catalog="fake:2", boot_delay=0.5)
    provider = registry.provider("simulated", flags).startup()
    assert isinstance(provider, SimulatedProvider)
    assert provider.catalog == fake_instance_types(2)
    assert provider.boot_delay_s == 0.5


def test_simulated_provider_refuses_a_bad_catalog() -> None:
    """A bad --catalog is one ProviderConfigError line naming the flag."""
    flags = argparse.Namespace(catalog="fake:0", boot_delay=1.0)
    with pytest.raises(ProviderConfigError, match="--catalog"):
        registry.provider("simulated", flags)


def test_aws_provider_requires_a_cluster_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The aws entry reads its settings from the environment and requires CLUSTER_NAME."""
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    with pytest.raises(ProviderConfigError, match="CLUSTER_NAME: required"):
        registry.provider("aws", argparse.Namespace())
