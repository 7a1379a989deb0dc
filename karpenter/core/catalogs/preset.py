"""A catalog preset's answer: the instance types an InstanceTypeCatalog document expands to.

Presets are named in ``providers.registry`` (``fake`` is the core's own catalog, ``aws`` the
AWS provider's); ``simulate`` asks the registry and never imports a provider.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter.core.model.instancetype import InstanceType


class CatalogError(ValueError):
    """A preset cannot be built; the message is one line naming the preset and the cause."""


@dataclass(frozen=True, slots=True)
class PresetCatalog:
    """The preset's instance types, and a line for people about them (``""`` when none)."""

    types: tuple[InstanceType, ...]
    note: str = ""
