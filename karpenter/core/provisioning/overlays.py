"""NodeOverlays: price and extended-capacity adjustments applied to a NodePool's instance types.

Overlays are ordered by weight (highest first), ties by name descending. For each NodePool and
instance type, an overlay applies when its requirements are compatible with the pool's label,
the template labels and the type's requirements; its price applies per compatible offering and
its capacity to the whole type. The first overlay to set an offering's price or a capacity
resource wins; a later overlay of the same weight touching the same thing is a conflict and is
not applied at all (upstream marks it ``ValidationSucceeded=False``, reason ``Conflict``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from karpenter.core.model import labels as lbl
from karpenter.core.model.cluster import NodeOverlay
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.nodepool import NodePool
from karpenter.core.scheduling.requirements import Requirements, from_selector_terms


def adjusted_price(price: float, overlay: NodeOverlay) -> float:
    """The overlay's absolute price, or the price moved by a delta or a percentage (≥ 0)."""
    if overlay.price is not None:
        return float(overlay.price)
    adj = overlay.price_adjustment or "+0"
    if adj.endswith("%"):
        return max(price * (1 + float(adj[:-1]) / 100), 0.0)
    return max(price + float(adj), 0.0)


def ordered(overlays: Sequence[NodeOverlay]) -> list[NodeOverlay]:
    """Weight descending, then name descending."""
    return sorted(overlays, key=lambda o: (o.weight, o.name), reverse=True)


def conflicts(
    pool: NodePool, types: Sequence[InstanceType], overlays: Sequence[NodeOverlay]
) -> set[str]:
    """Names of overlays that touch what an equal-weight overlay already set."""
    bad: set[str] = set()
    for it in types:
        owner: dict[tuple[str, str], NodeOverlay] = {}
        for overlay in ordered(overlays):
            if not _applies(pool, it, overlay):
                continue
            targets = [
                ("price", f"{o.zone}/{o.capacity_type}")
                for o in it.offerings
                if (overlay.price or overlay.price_adjustment) and _offer_ok(o, overlay)
            ]
            targets += [("capacity", name) for name in overlay.capacity]
            for target in targets:
                first = owner.setdefault(target, overlay)
                if first is not overlay and first.weight == overlay.weight:
                    bad.add(overlay.name)
    return bad


def _applies(pool: NodePool, it: InstanceType, overlay: NodeOverlay) -> bool:
    labels = dict(pool.template.labels)
    labels[lbl.NODEPOOL] = pool.name
    labels[lbl.INSTANCE_TYPE] = it.name
    reqs = it.requirements.intersect(Requirements.from_labels(labels))
    wanted = from_selector_terms(overlay.requirements).without((lbl.ZONE, lbl.CAPACITY_TYPE))
    return not reqs.conflicts(wanted) and not reqs.undefined_keys(wanted, frozenset())


def _offer_ok(offering: Offering, overlay: NodeOverlay) -> bool:
    reqs = from_selector_terms(overlay.requirements)
    return reqs.get_or_exists(lbl.ZONE).has(offering.zone) and reqs.get_or_exists(
        lbl.CAPACITY_TYPE
    ).has(offering.capacity_type)


def apply(
    pool: NodePool, types: Sequence[InstanceType], overlays: Sequence[NodeOverlay]
) -> tuple[InstanceType, ...]:
    """The pool's instance types with every non-conflicting overlay applied."""
    bad = conflicts(pool, types, overlays)
    usable = [o for o in ordered(overlays) if o.name not in bad]
    out = []
    for it in types:
        priced: set[int] = set()
        capacity = dict(it.capacity)
        set_capacity: set[str] = set()
        offerings = list(it.offerings)
        for overlay in usable:
            if not _applies(pool, it, overlay):
                continue
            if overlay.price is not None or overlay.price_adjustment is not None:
                for i, o in enumerate(offerings):
                    if i not in priced and _offer_ok(o, overlay):
                        offerings[i] = replace(o, price=adjusted_price(o.price, overlay))
                        priced.add(i)
            for name, value in overlay.capacity.items():
                if name not in set_capacity:
                    capacity[name] = value
                    set_capacity.add(name)
        out.append(replace(it, offerings=tuple(offerings), capacity=capacity))
    return tuple(out)
