"""Running the decision core on a loaded scenario: the same code the controller runs."""

from __future__ import annotations

from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.simulate import output
from karpenter.simulate.loader import Scenario


def provisioning(scenario: Scenario, options: Options) -> output.JSON:
    """One provisioning pass over every pending pod of the scenario."""
    results = solve(scenario.cluster, scenario.pending, options)
    return output.provisioning_json(results)
