"""NodeOverlays: price and capacity adjustments, ordering and conflicts."""

from __future__ import annotations

import pytest

from karpenter.core.model.cluster import NodeOverlay
from karpenter.core.provisioning import overlays
from tests.support import builders as b

TYPES = (b.instance_type("a", 2, 8, price=1.0), b.instance_type("b", 4, 16, price=2.0))


@pytest.mark.parametrize(
    ("overlay", "prices"),
    [
        pytest.param(NodeOverlay("abs", price="0.5"), [0.5, 0.5], id="absolute"),
        pytest.param(NodeOverlay("pct", price_adjustment="-10%"), [0.9, 1.8], id="percent"),
        pytest.param(NodeOverlay("delta", price_adjustment="+0.25"), [1.25, 2.25], id="delta"),
        pytest.param(NodeOverlay("floor", price_adjustment="-5"), [0.0, 0.0], id="floored"),
        pytest.param(
            NodeOverlay("only-a", (("node.kubernetes.io/instance-type", "In", ("a",), None),), "3"),
            [3.0, 2.0],
            id="requirements-select-types",
        ),
    ],
)
def test_price(overlay: NodeOverlay, prices: list[float]) -> None:
    """Overlays set or move offering prices of the types they match."""
    out = overlays.apply(b.nodepool(), TYPES, [overlay])
    assert [round(t.offerings[0].price, 6) for t in out] == prices


def test_higher_weight_wins_and_equal_weight_conflicts() -> None:
    """The heaviest overlay sets a price first; an equal-weight rival is not applied at all."""
    heavy = NodeOverlay("heavy", price="0.1", weight=10)
    light = NodeOverlay("light", price="0.2", weight=1)
    assert overlays.apply(b.nodepool(), TYPES, [light, heavy])[0].offerings[0].price == 0.1
    rival = NodeOverlay("rival", price="0.3", weight=10)
    assert overlays.conflicts(b.nodepool(), TYPES, [heavy, rival]) == {"heavy"}


def test_capacity_adds_extended_resource() -> None:
    """A capacity overlay adds an extended resource to matching types."""
    out = overlays.apply(
        b.nodepool(), TYPES, [NodeOverlay("gpu", capacity={"example.com/x": 2000})]
    )
    assert out[1].capacity["example.com/x"] == 2000
