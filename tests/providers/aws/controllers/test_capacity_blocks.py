"""Capacity-block expiration: claims in a block about to end are deleted, others are kept."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pytest
from structlog.testing import capture_logs

from karpenter.core.model.node import NodeClaim, NodeClassRef
from karpenter.providers.aws.controllers.capacity_blocks import (
    PERIOD_SECONDS,
    CapacityBlockExpiration,
)
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import reservations as rsv

END = 50_000.0


class Claims:
    def __init__(self, *claims: NodeClaim) -> None:
        self.items = list(claims)
        self.deleted: list[str] = []

    def all(self) -> Iterable[NodeClaim]:
        return list(self.items)

    async def delete(self, name: str) -> None:
        self.deleted.append(name)


class Classes:
    def __init__(self, *items: nc.EC2NodeClass) -> None:
        self.items = {i.name: i for i in items}

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        return self.items.get(name)


def claim(name: str, rid: str = "", nodeclass: str = "default", **kw: object) -> NodeClaim:
    labels = {rsv.ID_LABEL: rid} if rid else {}
    ref = NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", nodeclass)
    return replace(NodeClaim(name, labels=labels, node_class_ref=ref), **kw)  # type: ignore[arg-type]


def classes() -> Classes:
    found = (
        rsv.CapacityReservation(
            "cr-block", "p5.48xlarge", "a", "", "targeted", "capacity-block", END
        ),
        rsv.CapacityReservation("cr-odcr", "m5.large", "a", "", "targeted", "default", END),
    )
    return Classes(nc.EC2NodeClass("default", status=nc.Status(capacity_reservations=found)))


@pytest.mark.parametrize(
    ("now", "deleted"),
    [
        pytest.param(END - rsv.EXPIRY_LEAD_SECONDS - 60, [], id="an-hour-out"),
        pytest.param(END - rsv.EXPIRY_LEAD_SECONDS, ["in-block"], id="forty-minutes-out"),
    ],
)
@pytest.mark.asyncio
async def test_deletes_claims_in_closing_blocks(now: float, deleted: list[str]) -> None:
    """Only claims in a capacity block within 40 minutes of its end are deleted."""
    store = Claims(
        claim("in-block", "cr-block"),
        claim("in-odcr", "cr-odcr"),
        claim("plain"),
        claim("already-going", "cr-block", deleting=True),
        claim("other-class", "cr-block", nodeclass="missing"),
    )
    ctrl = CapacityBlockExpiration(store, classes(), lambda: now)
    with capture_logs() as logs:
        assert await ctrl.reconcile() == PERIOD_SECONDS
    assert store.deleted == deleted
    said = [e for e in logs if e["event"] == "initiating delete for capacity block expiration"]
    assert [e["nodeclaim"] for e in said] == deleted
