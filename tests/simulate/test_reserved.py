"""`simulate` with reserved offerings: the scenario format, the JSON contract, strict mode."""

from __future__ import annotations

import pytest

from karpenter.core.model.cluster import Options
from karpenter.simulate import loader, runner
from karpenter.simulate.loader import ScenarioError

TYPES = """
apiVersion: simulation.karpenter.sh/v1alpha1
kind: InstanceType
metadata: {name: r.large}
spec:
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  offerings:
    - {zone: zone-a, capacityType: on-demand, price: 0.1}
    - {zone: zone-a, capacityType: reserved, price: 0.0, reservationID: cr-1,
       reservationCapacity: 1}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec: {template: {spec: {requirements: []}}}
"""

POD = """
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec: {{containers: [{{name: c, resources: {{requests: {{cpu: 1500m}}}}}}]}}
"""


def test_reserved_offering_is_used_then_pods_wait() -> None:
    """The first pod launches into the reservation; the next waits for it (deferred)."""
    text = TYPES + POD.format(name="a") + POD.format(name="b")
    doc = runner.provisioning(loader.load(["-"], text), Options())
    [claim] = doc["nodeClaims"]
    assert claim["launch"]["capacityType"] == "reserved"
    assert claim["launch"]["reservationID"] == "cr-1"
    [waiting] = doc["unschedulable"]
    assert waiting["pod"] == "default/b" and waiting["deferred"] is True
    assert "reserved" in waiting["reason"]


@pytest.mark.parametrize(
    ("offering", "fragment"),
    [
        pytest.param(
            "{zone: zone-a, capacityType: reserved, price: 0.0}",
            "reservationID: a reserved offering names its reservation",
            id="reserved-without-id",
        ),
        pytest.param(
            "{zone: zone-a, capacityType: spot, price: 0.1, reservationID: cr-1}",
            "reservationID: only reserved offerings have one",
            id="id-on-spot",
        ),
        pytest.param(
            "{zone: zone-a, capacityType: reserved, price: 0.0, reservationID: cr-1,"
            " reservationCapacity: -1}",
            "reservationCapacity: must be a non-negative integer",
            id="negative-capacity",
        ),
    ],
)
def test_bad_reserved_offerings(offering: str, fragment: str) -> None:
    """A reserved offering without its reservation (or a stray one) is one precise error."""
    text = TYPES.replace("- {zone: zone-a, capacityType: on-demand, price: 0.1}", f"- {offering}")
    with pytest.raises(ScenarioError, match=fragment):
        loader.load(["-"], text)
