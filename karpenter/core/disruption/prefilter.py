"""Cheap proofs that single-node consolidation cannot act on a candidate, to skip its solve.

Two necessary conditions, each checked on totals: deleting needs room for the candidate's pods
on the other nodes (Σ requests within Σ free capacity, per resource); replacing needs some
instance type, in any NodePool, whose allocatable holds those requests and whose cheapest
offering costs less than the candidate. When both fail, the full simulation could only say no,
so skipping it never loses a command; it only saves the solver pass (most of a quiet cluster's
nodes fail both, which is what keeps the final "nothing to do" pass fast).
"""

from __future__ import annotations

from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.context import DisruptionPass
from karpenter.core.model import resources as res


def _free(ps: DisruptionPass) -> dict[str, dict[str, int]]:
    cache = ps.cache.get("free")
    if cache is None:
        per_node: dict[str, dict[str, int]] = {}
        for s in ps.states:
            if s.deleting:
                continue
            per_node[s.name] = res.floor_zero(res.subtract(s.allocatable, s.requested()))
        total = res.add(*per_node.values())
        cache = {"__total__": total, **per_node}
        ps.cache["free"] = cache
    return cache


def _cheapest_fit(ps: DisruptionPass, requests: res.Resources) -> float | None:
    if ps.price_table is None:
        table = []
        for types in ps.types_by_pool.values():
            for it in types.values():
                prices = [o.price for o in it.offerings if o.available]
                if prices:
                    table.append((min(prices), it.allocatable))
        table.sort(key=lambda row: row[0])
        ps.price_table = table
    for price, allocatable in ps.price_table:
        if res.fits(requests, allocatable):
            return price
    return None


def cannot_consolidate(ps: DisruptionPass, c: Candidate) -> str:
    """A reason when neither delete nor replace can work for ``c`` ("" when unsure)."""
    requests = res.add(*(p.requests for p in c.pods))
    free = _free(ps)
    elsewhere = res.subtract(free["__total__"], free.get(c.name, {}))
    if res.fits(requests, elsewhere):
        return ""
    floor = _cheapest_fit(ps, requests)
    if floor is not None and floor < c.price:
        return ""
    return (
        "NotCheaper: the other nodes lack room for its pods and no instance type that"
        " holds them is cheaper"
    )
