"""The cost pass: repack a pass's new NodeClaims into the cheapest mix of instance types.

The first pass (``scheduler``) decides which pods need new capacity and fills one claim after
another, first fit. This pass keeps every pod on a claim *of the same class* and changes only
how many claims of which types hold them. A class is the set of claims with the same NodePool
template and the same final requirements (zone, capacity type, ... already narrowed), so every
pod of a class may sit on any claim of it: its requirements, tolerations, volume topology and
every zone-scoped topology count stay what the first pass made them.

Pods that hostname-scoped rules tie to their claim (host ports, hostname spread, hostname pod
(anti-)affinity, either as owner or as a pod such a rule selects) stay on their claim; the
claim is then a *pinned* bin that the packing may retype and add pods to. Everything else in
the class is repacked as a variable-size bin packing over the class's types (``packing``),
with each type's capacity net of the DaemonSet overhead it attracts.

Nothing is trusted: ``replay`` re-places every pod of the pass in the first pass's commit order
with the solver's own predicates (``targets.try_claim``: requirements, taints, ports, resources
with daemons, volumes, topology, minValues, NodePool limits). A class whose plan fails there, or
would not finalize, or would not be cheaper, keeps the first pass's claims.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.pod import HostPort
from karpenter.core.provisioning import packing, sharing, work
from karpenter.core.provisioning.build import Limits, PassContext
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.targets import Claim, Existing, Template
from karpenter.core.provisioning.topology import Group, PodGroups, Topology
from karpenter.core.provisioning.volumes import PodVolumes
from karpenter.core.scheduling.requirements import Requirements

OPTIMAL = "optimal"
FIRSTFIT = "firstfit"
POLICIES = (OPTIMAL, FIRSTFIT)
# Claims with pinned pods are modelled as bins of their own kind; beyond this many kinds in
# a class they are left as they are (a work limit: rows and pricing grow with kinds).
MAX_PINNED_KINDS = 8
_EPS = 1e-9


class Placement(NamedTuple):
    """One commit of the first pass: the pod, its groups and volumes, where it went."""

    work: PodWork
    groups: PodGroups
    volumes: PodVolumes
    target: Claim | Existing
    requirements: Requirements  # the target's requirements the pod was counted with


@dataclass(frozen=True, slots=True)
class Start:
    """Topology counts and NodePool-limit usage before the first pass placed anything.

    Replays start from here: the limits count the claims of the pass incrementally, so a
    replay must forget the first pass's claims as the topology groups forget its pods.
    """

    counts: tuple[tuple[Group, dict[str, int], int], ...]
    limits: Limits
    usage: tuple[dict[str, dict[str, int]], dict[str, int]]

    def restore(self) -> None:
        """Put every group's counts and the limits' usage back to the start of the pass."""
        for group, counts, total in self.counts:
            group.counts = dict(counts)
            group.total = total
        self.limits.restore(self.usage)


def remember(ctx: PassContext) -> Start:
    """The topology counts and limit usage as the pass starts."""
    topology = ctx.topology
    groups = [*topology.groups.values(), *topology.inverse.values()]
    counts = tuple((g, dict(g.counts), g.total) for g in groups)
    return Start(counts, ctx.limits, ctx.limits.save())


@dataclass(slots=True)
class Planned:
    """A claim the cost pass wants: created during the replay, at its first pod."""

    template: Template
    hostname: str
    requirements: Requirements
    mask: int
    plan: int  # the class this claim belongs to (its key in ``repack``)
    claim: Claim | None = None


@dataclass(slots=True)
class _Class:
    """Claims of one template with equal requirements, and the placements on them."""

    template: Template
    requirements: Requirements
    claims: list[Claim] = field(default_factory=list)
    placements: list[int] = field(default_factory=list)  # indexes into the placement log


def pinned(placement: Placement, topology: Topology) -> bool:
    """Whether hostname-scoped rules tie the pod to the claim it is on."""
    pod = placement.work.pod
    if pod.host_ports:
        return True
    g = placement.groups
    counting, blocking = topology.selecting(pod)
    owned = (group for group, _ in g.owned)
    return any(
        group.key == lbl.HOSTNAME
        for group in (*owned, *g.inverse_blocking, *g.inverse_owned, *counting, *blocking)
    )


def _classes(claims: Sequence[Claim], placements: Sequence[Placement]) -> list[_Class]:
    by_key: dict[tuple[int, Requirements], _Class] = {}
    of_claim: dict[int, _Class] = {}
    for claim in claims:
        key = (claim.template.index, claim.requirements)
        cls = by_key.get(key)
        if cls is None:
            cls = by_key[key] = _Class(claim.template, claim.requirements)
        cls.claims.append(claim)
        of_claim[id(claim)] = cls
    for index, placement in enumerate(placements):
        cls = of_claim.get(id(placement.target))
        if cls is not None:
            cls.placements.append(index)
    return list(by_key.values())


def repack(
    ctx: PassContext,
    claims: list[Claim],
    placements: Sequence[Placement],
    start: Start,
    hostname: Callable[[], str],
    budget: work.Budget | None = None,
) -> list[Claim]:
    """The pass's claims, each class repacked where that is valid and cheaper, the packing's
    work charged to ``budget`` (default: ``Options.cost_work`` units)."""
    from karpenter.core.provisioning import replay  # noqa: PLC0415 - replay imports results

    plans: dict[int, tuple[_Class, dict[int, Planned]]] = {}
    budget = budget if budget is not None else work.Budget(ctx.options.cost_work)
    memory = sharing.Memory(budget)  # zones often pose one problem, or nearly
    shaped = [_prepare(ctx, whole, placements) for whole in _classes(claims, placements)]
    problems = [prepared for prepared in shaped if prepared is not None]
    for n, prepared in enumerate(problems):
        # The last class to pack may skip a search that cannot win; an earlier one may not:
        # its search leaves patterns and spent work that later classes' searches start from.
        planned = _plan(prepared, hostname, memory, proof=n == len(problems) - 1)
        if planned is not None:
            cls, plan = planned  # ``cls`` may leave frozen claims of its whole class out
            plans[id(cls)] = (cls, plan)
    if not plans:
        return claims  # nothing replayed: every count is still as the first pass left it
    while plans:
        targets = {i: p for _, plan in plans.values() for i, p in plan.items()}
        failed = replay.replay(ctx, placements, start, targets)
        failed |= {
            key
            for key, (cls, plan) in plans.items()
            if key not in failed and not replay.acceptable(ctx, cls.claims, plan.values())
        }
        if not failed:
            return _merge(claims, plans)
        for key in failed:
            del plans[key]
    replay.replay(ctx, placements, start, {})  # counts as the first pass left them
    return claims


def _merge(
    claims: Sequence[Claim], plans: dict[int, tuple[_Class, dict[int, Planned]]]
) -> list[Claim]:
    """Original claims with each repacked class's claims in place of its first claim."""
    replaced: dict[int, list[Claim]] = {}
    dropped: set[int] = set()
    for cls, plan in plans.values():
        new: list[Claim] = []
        seen: set[int] = set()
        for planned in plan.values():
            if planned.claim is not None and id(planned.claim) not in seen:
                seen.add(id(planned.claim))
                new.append(planned.claim)
        replaced[id(cls.claims[0])] = new
        dropped.update(id(c) for c in cls.claims)
    out: list[Claim] = []
    for claim in claims:
        if id(claim) in replaced:
            out.extend(replaced[id(claim)])
        elif id(claim) not in dropped:
            out.append(claim)
    return out


@dataclass(slots=True)
class _Shape:
    """A class as a packing problem, and how its answer maps back to pods and claims."""

    problem: packing.Problem
    names: tuple[str, ...]  # the resources of every size and capacity, in order
    types: list[int]  # problem type index -> catalog index
    groups: list[list[int]]  # movable placements per item group, in commit order
    pinned: list[list[Claim]]  # claims of each pinned kind (kind index - 1)
    pinned_on: dict[int, list[int]]  # pinned placements per claim (by id)
    free_hostnames: list[str]


class _Prepared(NamedTuple):
    """A class (less its frozen claims) as a packing problem, with first fit's bins."""

    cls: _Class
    shape: _Shape
    incumbent: list[packing.Bin]


def _prepare(ctx: PassContext, cls: _Class, placements: Sequence[Placement]) -> _Prepared | None:
    """The class as a packing problem (None: nothing to repack, keep the class as is)."""
    held = {i for i in cls.placements if pinned(placements[i], ctx.topology)}
    cls = _freeze(cls, placements, held)
    shape = _shape(cls, placements, held) if cls.claims else None
    if shape is None or not shape.problem.demand:
        return None
    incumbent = _incumbent(shape, cls, placements)
    return None if incumbent is None else _Prepared(cls, shape, incumbent)


def _plan(
    prepared: _Prepared,
    hostname: Callable[[], str],
    memory: sharing.Memory,
    *,
    proof: bool = False,
) -> tuple[_Class, dict[int, Planned]] | None:
    """The claims repacked and where each of their placements goes (None: keep the class as
    is); ``proof``: first ask whether whole bins prove first fit's the cheapest (no search)."""
    cls, shape, incumbent = prepared
    price = packing.cost(shape.problem, incumbent)
    if proof:
        from karpenter.core.provisioning import unitcover  # noqa: PLC0415 - loads numpy

        if unitcover.proven(shape.problem, price):
            return None
    family = (cls.template.index, shape.names)
    bins = memory.pack(family, shape.problem, incumbent, shape.types)
    if packing.cost(shape.problem, bins) >= price - _EPS:
        return None
    return cls, _assign(cls, shape, bins, hostname)


def _freeze(cls: _Class, placements: Sequence[Placement], pins: set[int]) -> _Class:
    """The class without its claims holding pinned pods (``pins``: their placements) when
    those are of too many kinds (distinct contents) to model: such claims then stay exactly
    as the first pass left them."""
    kinds: set[tuple[tuple[str, int], ...]] = set()
    held: set[int] = set()
    for index in cls.placements:
        if index in pins:
            held.add(id(placements[index].target))
    if not held:
        return cls
    for claim in cls.claims:
        if id(claim) in held:
            kinds.add(tuple(sorted(claim.requests.items())))
    if len(kinds) <= MAX_PINNED_KINDS:
        return cls
    keep = [c for c in cls.claims if id(c) not in held]
    indexes = [i for i in cls.placements if id(placements[i].target) not in held]
    return _Class(cls.template, cls.requirements, keep, indexes)


def _names(cls: _Class, placements: Sequence[Placement]) -> list[str]:
    names = {res.PODS}
    for index in cls.placements:
        names.update(placements[index].work.pod.requests)
    for group in cls.template.daemon_groups:
        names.update(group.overhead)
    return sorted(names)


def _shape(cls: _Class, placements: Sequence[Placement], pins: set[int]) -> _Shape | None:
    t = cls.template
    catalog = t.catalog
    names = _names(cls, placements)
    class_mask = t.base_mask & catalog.compatible(cls.requirements)
    priced = [(i, o.price) for i, o in catalog.priced(cls.requirements).order]
    types = [i for i, _ in priced if class_mask >> i & 1]
    if not types:
        return None
    position = {i: n for n, i in enumerate(types)}
    bin_types = tuple(
        packing.BinType(price, _capacity(t, i, names)) for i, price in priced if i in position
    )
    sizes: dict[tuple[int, ...], list[int]] = {}
    bases: dict[tuple[tuple[int, ...], tuple[HostPort, ...]], list[Claim]] = {}
    pinned_on: dict[int, list[int]] = {}
    for index in cls.placements:
        placement = placements[index]
        if index in pins:
            pinned_on.setdefault(id(placement.target), []).append(index)
        else:
            size = tuple(placement.work.pod.requests.get(n, 0) for n in names)
            sizes.setdefault(size, []).append(index)
    free_hostnames = []
    for claim in cls.claims:
        held = pinned_on.get(id(claim))
        if not held:
            free_hostnames.append(claim.hostname)
            continue
        pods = [placements[i].work.pod for i in held]
        base = tuple(sum(p.requests.get(n, 0) for p in pods) for n in names)
        ports = tuple(sorted((hp for p in pods for hp in p.host_ports), key=_port_key))
        bases.setdefault((base, ports), []).append(claim)
    kinds = [packing.Kind((0,) * len(names), 0, _kind_types(t, class_mask, {}, (), position))]
    for (base, ports), members in bases.items():
        requests = dict(zip(names, base, strict=True))
        allowed = _kind_types(t, class_mask, requests, ports, position)
        kinds.append(packing.Kind(base, len(members), allowed))
    problem = packing.Problem(
        tuple(sizes), tuple(len(v) for v in sizes.values()), bin_types, tuple(kinds)
    )
    return _Shape(
        problem,
        tuple(names),
        types,
        list(sizes.values()),
        list(bases.values()),
        pinned_on,
        free_hostnames,
    )


def _port_key(hp: HostPort) -> tuple[int, str, str]:
    return (hp.port, hp.protocol, hp.ip)


def _capacity(t: Template, index: int, names: Sequence[str]) -> tuple[int, ...]:
    """Allocatable net of the daemons that this type attracts, per resource."""
    alloc = t.catalog.allocatable[index]
    overhead = next((g.overhead for g in t.daemon_groups if g.mask >> index & 1), {})
    return tuple(alloc.get(n, 0) - overhead.get(n, 0) for n in names)


def _kind_types(
    t: Template,
    class_mask: int,
    base: dict[str, int],
    ports: tuple[HostPort, ...],
    position: dict[int, int],
) -> tuple[int, ...]:
    mask = class_mask & t.fit_mask(base, ports)
    return tuple(position[i] for i in t.catalog.indices(mask) if i in position)


def _incumbent(
    shape: _Shape, cls: _Class, placements: Sequence[Placement]
) -> list[packing.Bin] | None:
    """The first pass's claims as bins of the problem (None: one of them does not fit)."""
    group_of = {i: g for g, members in enumerate(shape.groups) for i in members}
    kind_of = {id(c): k + 1 for k, claims in enumerate(shape.pinned) for c in claims}
    counts: dict[int, list[int]] = {id(c): [0] * len(shape.groups) for c in cls.claims}
    for index in cls.placements:
        g = group_of.get(index)
        if g is not None:
            counts[id(placements[index].target)][g] += 1
    bins = []
    for claim in cls.claims:
        kind = kind_of.get(id(claim), 0)
        held = counts[id(claim)]
        t = shape.problem.cheapest(kind, held)
        if t is None:
            return None
        bins.append(packing.Bin(kind, t, tuple(held)))
    return bins


def _assign(
    cls: _Class, shape: _Shape, bins: Sequence[packing.Bin], hostname: Callable[[], str]
) -> dict[int, Planned]:
    """Placements of the class mapped to the planned claims of ``bins``."""
    t = cls.template
    mask = t.base_mask & t.catalog.compatible(cls.requirements)
    free = iter(shape.free_hostnames)
    pinned_left = [list(claims) for claims in shape.pinned]
    out: dict[int, Planned] = {}
    cursors = [iter(members) for members in shape.groups]
    for b in bins:
        if b.kind == 0:
            planned = Planned(t, next(free, None) or hostname(), cls.requirements, mask, id(cls))
        else:
            claim = pinned_left[b.kind - 1].pop(0)
            planned = Planned(t, claim.hostname, cls.requirements, mask, id(cls))
            for index in shape.pinned_on[id(claim)]:
                out[index] = planned
        for g, n in enumerate(b.counts):
            for _ in range(n):
                out[next(cursors[g])] = planned
    return out
