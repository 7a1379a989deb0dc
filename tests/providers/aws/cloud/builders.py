"""EC2NodeClass values for the moto tests: discovery-tag selectors by default, overrides on top."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from karpenter.core.model.node import NodeClaim
from karpenter.providers.aws.core import nodeclass as nc

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


class Claims:
    """In-memory NodeClaims + Nodes: the Protocols of the interruption and GC controllers."""

    def __init__(self, *claims: NodeClaim) -> None:
        self.items = {c.name: c for c in claims}
        self.deleted: list[str] = []
        self.nodes_deleted: list[str] = []
        self.fail_next_delete = False

    def put(self, claim: NodeClaim) -> None:
        """Add or replace a claim."""
        self.items[claim.name] = claim

    async def find_by_instance_id(self, instance_id: str) -> NodeClaim | None:
        """The claim whose provider id ends in the instance id."""
        return next(
            (c for c in self.items.values() if c.provider_id.endswith(f"/{instance_id}")), None
        )

    async def delete(self, name: str) -> None:
        """Delete a claim (raises once when ``fail_next_delete``)."""
        if self.fail_next_delete:
            self.fail_next_delete = False
            raise RuntimeError("apiserver unavailable")
        self.items.pop(name)
        self.deleted.append(name)

    async def claimed_provider_ids(self) -> set[str]:
        """Provider ids of every claim."""
        return {c.provider_id for c in self.items.values()}

    async def delete_node(self, provider_id: str) -> None:
        """Record a Node deletion."""
        self.nodes_deleted.append(provider_id)


class Events:
    """Recorded events: (claim name, reason)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def publish(self, claim: NodeClaim, reason: str, message: str) -> None:
        """Record one event."""
        self.items.append((claim.name, reason))
