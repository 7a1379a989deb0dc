"""EC2NodeClass values for the moto tests: discovery-tag selectors by default, overrides on top."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from karpenter.core.aws import nodeclass as nc

DISCOVERY = nc.SelectorTerm(tags={"karpenter.sh/discovery": "demo"})


def node_class(name: str = "default", **spec: Any) -> nc.EC2NodeClass:
    """An al2023@latest class selecting the discovery-tagged subnets and groups."""
    base = nc.Spec(
        subnet_selector_terms=(DISCOVERY,),
        security_group_selector_terms=(DISCOVERY,),
        ami_selector_terms=(nc.SelectorTerm(alias="al2023@latest"),),
        role="KarpenterNodeRole-demo",
    )
    return nc.EC2NodeClass(name, replace(base, **spec), uid=f"uid-{name}")


class NodeClasses:
    """An in-memory NodeClassSource."""

    def __init__(self, *items: nc.EC2NodeClass) -> None:
        self.items = {i.name: i for i in items}

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        """The class by name."""
        return self.items.get(name)

    def put(self, item: nc.EC2NodeClass) -> None:
        """Add or replace a class."""
        self.items[item.name] = item


class Clock:
    """A settable wall clock (seconds)."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
