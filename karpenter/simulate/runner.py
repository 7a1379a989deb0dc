"""Running the decision core on a loaded scenario: the same code the controller runs."""

from __future__ import annotations

from karpenter.core.disruption.planner import plan
from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.simulate import output
from karpenter.simulate.loader import Scenario


def provisioning(scenario: Scenario, options: Options) -> output.JSON:
    """One provisioning pass over every pending pod of the scenario."""
    results = solve(scenario.cluster, scenario.pending, options, bound=True)
    return output.provisioning_json(results)


def disruption(scenario: Scenario, options: Options, now: float) -> output.JSON:
    """Every disruption command from the scenario's snapshot, each applied before the next."""
    return output.disruption_json(plan(scenario.cluster, options, now))
