"""Carrying a solver set-up from one snapshot to the next when only a few nodes changed.

A disruption plan applies one command at a time: a few nodes leave, a few receive pods, a
replacement joins. Rebuilding the set-up of the next snapshot (existing capacity in pass order,
the free-capacity index, pool usage) costs O(nodes) per command; ``advance`` updates it in place
instead. A node that left keeps its slot, with no room in the free index, and every pass leaves
it out (``_Base.dead``), as passes already leave disruption candidates out: the solver's results
are those of a fresh set-up (``tests/core/test_disruption_incremental.py`` checks both ways). A
joining node takes its place in pass order. Too many dead slots, and the set-up is rebuilt.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from karpenter.core.model import resources as res
from karpenter.core.model.cluster import Cluster
from karpenter.core.provisioning.build import Reuse, _Base, _base, _existing
from karpenter.core.provisioning.existing import StateNode

# Rebuild once this many slots (and at least a quarter of them) are dead: a dead slot costs
# every pass a little, a rebuild costs O(nodes) once.
MIN_DEAD = 64


def _order(state: StateNode) -> tuple[bool, str]:
    """Pass order of existing nodes: initialized first, then by name (as ``_live_states``)."""
    return (not state.initialized, state.name)


def _usage(base: _Base, state: StateNode, sign: int) -> None:
    pool = state.nodepool
    if not pool:
        return
    used = base.pool_used.get(pool, {})
    change = state.capacity if sign > 0 else {k: -v for k, v in state.capacity.items()}
    base.pool_used[pool] = res.add(used, change)
    base.pool_nodes[pool] = base.pool_nodes.get(pool, 0) + sign


def _leave(base: _Base, index: int, dead: set[int]) -> None:
    _usage(base, base.states[index], -1)
    del base.index[base.states[index].name]
    base.free.kill(index)
    dead.add(index)


def _join(base: _Base, cluster: Cluster, state: StateNode, dead: set[int]) -> set[int]:
    """Insert ``state`` at its place in pass order; returns the shifted dead slots."""
    pos = bisect.bisect_left(base.states, _order(state), key=_order)
    node = _existing(cluster, [state], base.volumes)[0]
    base.states.insert(pos, state)
    base.existing.insert(pos, node)
    base.free.insert(pos, node.remaining)
    index = base.index
    for j in range(pos + 1, len(base.states)):
        name = base.states[j].name
        if index.get(name) == j - 1:
            index[name] = j
    index[state.name] = pos
    _usage(base, state, 1)
    return {d + 1 if d >= pos else d for d in dead}


def _update(
    base: _Base, cluster: Cluster, changed: Sequence[StateNode], dead: set[int]
) -> list[StateNode]:
    """Replace changed nodes in place; returns those that must leave and join again."""
    rejoin = []
    for state in changed:
        i = base.index.get(state.name)
        if i is None:
            if not state.deleting:
                rejoin.append(state)
            continue
        old = base.states[i]
        if (
            state.deleting
            or _order(state) != _order(old)
            or state.nodepool != old.nodepool
            or state.capacity != old.capacity
        ):
            _leave(base, i, dead)
            if not state.deleting:
                rejoin.append(state)
            continue
        node = _existing(cluster, [state], base.volumes)[0]
        base.states[i] = state
        base.existing[i] = node
        base.free.replace(i, node.remaining)
    return rejoin


def advance(
    reuse: Reuse,
    cluster: Cluster,
    every: list[StateNode],
    removed: Sequence[str],
    changed: Sequence[StateNode],
    added: Sequence[StateNode],
) -> _Base:
    """Make ``reuse`` hold the set-up of ``cluster`` (whose state nodes are ``every``), given
    that it held the previous snapshot's and only these nodes differ. The previous set-up is
    consumed; per-snapshot values derived from it (``Reuse.derived``) start empty."""
    base = reuse.base
    reuse.every_cluster, reuse.every_state = cluster, every
    if base is None:
        return reuse.snapshot(cluster)
    dead = set(base.dead)
    for name in removed:
        i = base.index.get(name)
        if i is not None:
            _leave(base, i, dead)
    joining = _update(base, cluster, changed, dead) + [s for s in added if not s.deleting]
    for state in sorted(joining, key=_order):
        dead = _join(base, cluster, state, dead)
    base.cluster = cluster
    base.dead = frozenset(dead)
    # Per-node topology tables are keyed by slot: recomputed on demand.
    base.seeds = {}
    base.bound_pods = None
    base.derived = {}
    moved = [*changed, *joining]
    if base.anti_owners or any(p.required_anti_affinity for s in moved for p in s.pods):
        base.anti_owners = [
            (i, p)
            for i, s in enumerate(base.states)
            for p in s.pods
            if p.required_anti_affinity and p.is_active()
        ]
    if len(dead) > max(MIN_DEAD, len(base.states) // 4):
        live = {e.state.name: e for i, e in enumerate(base.existing) if i not in dead}
        base = _base(cluster, every, live)
    reuse.base = base
    return base
