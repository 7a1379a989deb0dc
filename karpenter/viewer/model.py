"""The viewer's model: nodes, NodeClaims and pods in, rows, states, totals and subtotals out.

Pure functions over core values (no I/O, no clock: ``now`` is an argument), so the screen is a
thin rendering of what these return and the tests are tables. One row per Node, plus one per
NodeClaim that has no Node yet (launching). A row's state is the furthest lifecycle step it
reached, with deletion and disruption taking precedence: terminating (Node or NodeClaim being
deleted), disrupting (the ``karpenter.sh/disrupted`` taint, with the reason when known),
initialized, registered, launching; a Node no NodePool owns is ``unmanaged``. Requested CPU and
memory sum the active pods bound to the Node; prices come from the cloud's catalogue by
(instance type, zone, capacity type). A month is 730 hours, as AWS prices it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.model.pod import Pod

HOURS_PER_MONTH = 730

LAUNCHING = "launching"
REGISTERED = "registered"
INITIALIZED = "initialized"
DISRUPTING = "disrupting"
TERMINATING = "terminating"
UNMANAGED = "unmanaged"

# Sort keys a person can cycle through, and the column each sorts by.
SORT_KEYS = ("name", "nodepool", "type", "zone", "age", "state", "cpu", "memory", "pods", "price")

PriceKey = tuple[str, str, str]  # (instance type, zone, capacity type)


@dataclass(frozen=True, slots=True)
class PriceBook:
    """Hourly prices by offering, and per (type, capacity type) when the zone is unknown."""

    by_offering: Mapping[PriceKey, float] = field(default_factory=dict)
    by_type: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        """USD/h of the offering, else the type's dearest of that capacity type, else None."""
        found = self.by_offering.get((instance_type, zone, capacity_type))
        if found is not None:
            return found
        return self.by_type.get((instance_type, capacity_type))


def price_book(catalogue: Iterable[InstanceType]) -> PriceBook:
    """Index a catalogue's offerings (the first type of a name wins, as the solver's catalogue)."""
    offerings: dict[PriceKey, float] = {}
    types: dict[tuple[str, str], float] = {}
    seen: set[str] = set()
    for it in catalogue:
        if it.name in seen:
            continue
        seen.add(it.name)
        for o in it.offerings:
            offerings.setdefault((it.name, o.zone, o.capacity_type), o.price)
            key = (it.name, o.capacity_type)
            types[key] = max(types.get(key, 0.0), o.price)
    return PriceBook(offerings, types)


@dataclass(frozen=True, slots=True)
class Row:
    """One node (or launching NodeClaim) as the screen shows it."""

    name: str
    nodepool: str
    instance_type: str
    capacity_type: str
    zone: str
    created: float
    state: str
    reason: str
    cpu_requested: int
    cpu_allocatable: int
    memory_requested: int
    memory_allocatable: int
    pods: int
    price: float | None

    def cell(self, key: str) -> tuple[object, ...]:
        """The value ``key`` sorts by (ties broken by name)."""
        values: dict[str, object] = {
            "name": self.name,
            "nodepool": self.nodepool,
            "type": self.instance_type,
            "zone": self.zone,
            "age": self.created,  # oldest first
            "state": _STATE_ORDER.get(self.state, 9),
            "cpu": -_ratio(self.cpu_requested, self.cpu_allocatable),
            "memory": -_ratio(self.memory_requested, self.memory_allocatable),
            "pods": -self.pods,
            "price": -(self.price or 0.0),
        }
        return (values[key], self.name)


_STATE_ORDER = {
    LAUNCHING: 0,
    REGISTERED: 1,
    INITIALIZED: 2,
    DISRUPTING: 3,
    TERMINATING: 4,
    UNMANAGED: 5,
}


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Pending:
    """A pod waiting for capacity, and what Karpenter says about it now."""

    key: str
    cpu: int
    memory: int
    age_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class Totals:
    """Sums over a set of rows (the whole cluster, or one NodePool)."""

    nodes: int = 0
    pods: int = 0
    price: float = 0.0
    unpriced: int = 0
    cpu_requested: int = 0
    cpu_allocatable: int = 0
    memory_requested: int = 0
    memory_allocatable: int = 0

    @property
    def monthly(self) -> float:
        """USD per month at the hourly price."""
        return self.price * HOURS_PER_MONTH

    @property
    def cpu_utilisation(self) -> float:
        """Requested over allocatable CPU, 0 without capacity."""
        return _ratio(self.cpu_requested, self.cpu_allocatable)

    @property
    def memory_utilisation(self) -> float:
        """Requested over allocatable memory, 0 without capacity."""
        return _ratio(self.memory_requested, self.memory_allocatable)


def bound_requests(pods: Iterable[Pod]) -> tuple[int, int, int]:
    """(cpu, memory, count) of the active pods among ``pods``."""
    cpu = memory = count = 0
    for p in pods:
        if not p.is_active():
            continue
        count += 1
        cpu += p.requests.get(res.CPU, 0)
        memory += p.requests.get(res.MEMORY, 0)
    return cpu, memory, count


def node_state(node: Node | None, claim: NodeClaim | None) -> str:
    """The furthest lifecycle step, deletion and disruption first (module docstring)."""
    if (node is not None and node.deleting) or (claim is not None and claim.deleting):
        return TERMINATING
    if node is not None and any(t.key == lbl.TAINT_DISRUPTED for t in node.taints):
        return DISRUPTING
    labels = node.labels if node is not None else {}
    if claim is None and lbl.NODEPOOL not in labels:
        return UNMANAGED
    if (claim is not None and claim.initialized) or labels.get(lbl.INITIALIZED) == "true":
        return INITIALIZED
    if node is not None and (
        (claim is not None and claim.registered) or labels.get(lbl.REGISTERED) == "true"
    ):
        return REGISTERED
    return LAUNCHING


@dataclass(frozen=True, slots=True)
class NodeInput:
    """What the shell gathered for one node: its objects, its pods, a disruption reason."""

    node: Node | None
    claim: NodeClaim | None
    pods: Sequence[Pod] = ()
    disruption_reason: str = ""


def row(item: NodeInput, prices: PriceBook) -> Row:
    """The row of one node or launching NodeClaim."""
    node, claim = item.node, item.claim
    labels: Mapping[str, str] = dict(claim.labels) if claim is not None else {}
    if node is not None:
        labels = {**labels, **node.labels}
    itype = labels.get(lbl.INSTANCE_TYPE, "")
    zone = labels.get(lbl.ZONE, "")
    ctype = labels.get(lbl.CAPACITY_TYPE, "")
    allocatable = node.allocatable if node is not None and node.allocatable else {}
    if not allocatable and claim is not None:
        allocatable = claim.allocatable
    creation = claim.creation if claim is not None and claim.creation else 0.0
    if not creation and node is not None:
        creation = node.creation
    cpu, memory, count = bound_requests(item.pods)
    state = node_state(node, claim)
    price = prices.price(itype, zone, ctype) if itype else None
    return Row(
        name=node.name if node is not None else (claim.name if claim is not None else ""),
        nodepool=labels.get(lbl.NODEPOOL, claim.nodepool if claim is not None else ""),
        instance_type=itype,
        capacity_type=ctype,
        zone=zone,
        created=creation,
        state=state,
        reason=item.disruption_reason if state == DISRUPTING else "",
        cpu_requested=cpu,
        cpu_allocatable=allocatable.get(res.CPU, 0),
        memory_requested=memory,
        memory_allocatable=allocatable.get(res.MEMORY, 0),
        pods=count,
        price=price,
    )


def totals(rows: Iterable[Row], pods: int | None = None) -> Totals:
    """Sums over ``rows`` (``pods`` overrides the bound-pod count, e.g. to add unbound ones)."""
    nodes = bound = unpriced = 0
    price = 0.0
    cpu_r = cpu_a = mem_r = mem_a = 0
    for r in rows:
        nodes += 1
        bound += r.pods
        if r.price is None:
            unpriced += 1
        else:
            price += r.price
        cpu_r += r.cpu_requested
        cpu_a += r.cpu_allocatable
        mem_r += r.memory_requested
        mem_a += r.memory_allocatable
    return Totals(
        nodes, bound if pods is None else pods, price, unpriced, cpu_r, cpu_a, mem_r, mem_a
    )


def subtotals(rows: Iterable[Row]) -> list[tuple[str, Totals]]:
    """Totals per NodePool, by name ("" for nodes no NodePool owns, last)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.nodepool, []).append(r)
    return [(name, totals(groups[name])) for name in sorted(groups, key=lambda n: (not n, n))]


def matches(r: Row, needle: str) -> bool:
    """Case-insensitive substring over name, NodePool, type, zone, capacity type and state."""
    if not needle:
        return True
    hay = " ".join((r.name, r.nodepool, r.instance_type, r.zone, r.capacity_type, r.state))
    return needle.lower() in hay.lower()


def arrange(rows: Iterable[Row], sort_key: str, needle: str = "") -> list[Row]:
    """The rows matching ``needle``, ordered by ``sort_key`` (unknown keys sort by name)."""
    key = sort_key if sort_key in SORT_KEYS else "name"
    return sorted((r for r in rows if matches(r, needle)), key=lambda r: r.cell(key))


def pending(
    pods: Iterable[Pod], reasons: Mapping[str, str], now: float, waiting: str
) -> list[Pending]:
    """Pending pods, oldest first, each with its reason (``waiting`` when none is known)."""
    out = [
        Pending(
            p.key,
            p.requests.get(res.CPU, 0),
            p.requests.get(res.MEMORY, 0),
            max(now - p.creation, 0.0) if p.creation else 0.0,
            reasons.get(p.key, waiting),
        )
        for p in pods
    ]
    return sorted(out, key=lambda p: (-p.age_s, p.key))


def age(seconds: float) -> str:
    """kubectl's age format: 45s, 12m, 5h, 3d."""
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 3600 * 2:
        return f"{s // 60}m"
    if s < 86400 * 2:
        return f"{s // 3600}h"
    return f"{s // 86400}d"
