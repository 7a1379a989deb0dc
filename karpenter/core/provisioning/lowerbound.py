"""A lower bound on the hourly price of a pass's new NodeClaims that no valid fleet beats.

The bound relaxes, never tightens. Each pod may use any (NodePool, instance type) its
tolerations, required node affinity (any term) and volume topology allow, at the cheapest
offering the pool allows, with the type's allocatable net of the DaemonSets it attracts.

The pods' options are ``boundmodel``'s.

1. *Fluid*: an LP where pods split freely across fractional nodes (every resource of a node
   bounded by its capacity). Its dual gives each pod a price ``u`` that no node can exceed in
   total: a node of type t holding pods P costs at least Σ_P u.
2. *Zones*: some pods are forced into a zone. Required DoNotSchedule zone spreads whose pods on
   new capacity all own them fix, per zone, a minimum count (the skew invariant: every zone
   that receives a pod ends within ``maxSkew`` of the emptiest eligible zone); a pod allowed in
   one zone only is forced there (``zonebound``, with ``cover``'s integer programs).
3. *Whole nodes*: whole nodes of any zone whose summed capacity covers every pod, and the
   cheapest node that holds each pod alone.

The result is the largest of these, scaled down by a part per million for solver tolerances.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from karpenter.core.provisioning import boundmodel, cover, lp, zonebound
from karpenter.core.provisioning.boundmodel import Model, NodeType
from karpenter.core.provisioning.build import PassContext
from karpenter.core.provisioning.results import NewNodeClaim

TOLERANCE = 1e-6


@dataclass(frozen=True, slots=True)
class Cost:
    """A fleet's hourly price, a bound no valid fleet beats, and their ratio (None: no bound
    above zero for a positive price)."""

    per_hour: float
    lower_bound_per_hour: float
    ratio: float | None


def cost(price: float, bound: float | None) -> Cost:
    """The cost figures of a pass (the bound is rounded down to a micro-dollar: still a bound)."""
    floor = math.floor((bound or 0.0) * 1e6) / 1e6
    if price <= 0 and floor <= 0:
        ratio: float | None = 1.0
    elif floor > 0:
        ratio = round(price / floor, 4)
    else:
        ratio = None
    return Cost(round(price, 6), floor, ratio)


def compute(ctx: PassContext, claims: Sequence[NewNodeClaim]) -> float:
    """A price (USD/hour) no valid set of new claims for the pods of ``claims`` undercuts."""
    pods = [p for c in claims for p in c.pods]
    if not pods:
        return 0.0
    model = boundmodel.build(ctx, pods)
    if model is None:
        return 0.0
    fluid, value = _fluid(model)
    if fluid is None:
        return 0.0
    bounds = (
        fluid,
        zonebound.zones(ctx, model, claims, value),
        _whole_nodes(model),
        max(_alone(model, size, allowed) for size, allowed, _ in model.groups),
    )
    return max(bounds) * (1 - TOLERANCE)


def _fluid(model: Model) -> tuple[float | None, list[float]]:
    """The fluid optimum and each group's per-pod price (its dual)."""
    groups = len(model.groups)
    resources = len(model.names)
    rows = groups + resources * len(model.types)
    lower = [float(len(m)) for _, _, m in model.groups] + [-lp.INF] * (rows - groups)
    upper = [float(len(m)) for _, _, m in model.groups] + [0.0] * (rows - groups)
    program = lp.Model(lower, upper)
    for j, t in enumerate(model.types):
        if math.isinf(t.price):
            continue
        program.add_column(
            t.price, [(groups + j * resources + r, -c) for r, c in enumerate(t.capacity)]
        )
    for g, (size, allowed, _) in enumerate(model.groups):
        for j in allowed:
            if math.isinf(model.types[j].price):
                continue
            entries = [(g, 1.0)]
            entries += [(groups + j * resources + r, s) for r, s in enumerate(size) if s]
            program.add_column(0.0, entries)
    solution = lp.solve(program)
    if not solution.ok:
        return None, []
    return solution.objective, [max(d, 0.0) for d in solution.duals[:groups]]


def _alone(model: Model, size: Sequence[float], allowed: Sequence[int]) -> float:
    """Some node holds this pod: at least the cheapest allowed type that fits it alone."""
    return min(
        (
            model.types[j].price
            for j in allowed
            if all(s <= c for s, c in zip(size, model.types[j].capacity, strict=True))
        ),
        default=0.0,
    )


def _whole_nodes(model: Model) -> float:
    """Whole nodes of any zone whose summed capacity covers every pod (proven bound)."""
    need = [
        sum(size[r] * len(members) for size, _, members in model.groups)
        for r in range(len(model.names))
    ]
    types = [
        NodeType(t.template, t.index, t.price, t.capacity, {"": t.price})
        for t in model.types
        if math.isfinite(t.price)
    ]
    counts: dict[tuple[float, ...], int] = {}
    for size, _, members in model.groups:
        counts[size] = counts.get(size, 0) + len(members)
    return cover.integer_cover(types, "", need, counts)
