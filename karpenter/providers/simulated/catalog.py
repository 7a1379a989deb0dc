"""The simulated cloud's catalog from ``--catalog``: ``fake:N`` or a YAML file of instance types.

A file holds InstanceType documents or InstanceTypeCatalog documents of the ``fake`` preset;
other kinds are skipped, so a ``simulate`` scenario file works as a catalog. Bad input is one
``ProviderConfigError`` line naming the flag, the file and the document.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from karpenter.api import simulation
from karpenter.api.errors import DecodeError
from karpenter.cloud.plugin import ProviderConfigError
from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model.instancetype import InstanceType


def parse_catalog(spec: str) -> tuple[InstanceType, ...]:
    """``fake:N`` or a YAML file with InstanceType / InstanceTypeCatalog (preset fake) documents
    (other kinds are skipped, so a ``simulate`` scenario file works as a catalog)."""
    if spec.startswith("fake:"):
        try:
            count = int(spec.removeprefix("fake:"))
        except ValueError:
            raise ProviderConfigError(f"--catalog: {spec!r}: expected fake:N") from None
        if not 1 <= count <= 10000:
            raise ProviderConfigError(f"--catalog: {spec!r}: N must be from 1 to 10000")
        return fake_instance_types(count)
    try:
        docs = list(yaml.safe_load_all(Path(spec).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError) as err:
        raise ProviderConfigError(f"--catalog: cannot read {spec}: {err}") from None
    types: list[InstanceType] = []
    for index, doc in enumerate(d for d in docs if d):
        types.extend(_catalog_doc(spec, index, doc))
    if not types:
        raise ProviderConfigError(f"--catalog: {spec}: no InstanceType documents")
    return tuple(types)


def _catalog_doc(path: str, index: int, doc: Mapping[str, Any]) -> tuple[InstanceType, ...]:
    try:
        if doc.get("kind") == "InstanceType":
            return (simulation.instance_type(doc),)
        if doc.get("kind") == "InstanceTypeCatalog":
            preset = simulation.catalog(doc)
            if preset.preset != "fake":
                raise ProviderConfigError(f"--catalog: {path}: only the fake preset is available")
            return fake_instance_types(preset.count)
    except DecodeError as err:
        raise ProviderConfigError(f"--catalog: {path}: document {index + 1}: {err}") from None
    return ()  # other documents (a simulate scenario's NodePools, Pods...) are not the catalog
