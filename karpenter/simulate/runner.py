"""Running the decision core on a loaded scenario: the same code the controller runs."""

from __future__ import annotations

from karpenter.core.disruption.planner import plan
from karpenter.core.model.cluster import Options
from karpenter.core.provisioning.scheduler import solve
from karpenter.simulate import output
from karpenter.simulate.loader import Scenario


def provisioning(scenario: Scenario, options: Options) -> output.JSON:
    """One provisioning pass over every pending pod of the scenario."""
    virtual = scenario.cluster.virtual_pods  # CapacityBuffers' chunks join the pass
    pods = [*scenario.pending, *virtual]
    # the controller's pass: launches hedged against the kube-scheduler's mixing
    results = solve(scenario.cluster, pods, options, bound=True, hedge=options.mixing_hedge)
    return output.provisioning_json(results, scenario.buffers, virtual)


def disruption(
    scenario: Scenario, options: Options, now: float, *, respect_consolidate_after: bool = False
) -> output.JSON:
    """Every disruption command from the scenario's snapshot, each applied before the next
    (``consolidateAfter`` counted as elapsed unless ``respect_consolidate_after``)."""
    result = plan(
        scenario.cluster,
        options,
        now,
        assume_consolidate_after_elapsed=not respect_consolidate_after,
    )
    return output.disruption_json(result, scenario.buffers)
