"""Failed splits, remembered so the same attempt is not paid for again.

A split (``split``) is a second what-if that repacks the pods needing new capacity; a pass
tries at most ``DisruptionPass.splits_left`` of them. Its answer is a function of the
candidates and of the one-replacement what-if before it: the same pods placed on the same
nodes and new NodeClaims give the same repack and the same prices. So once a split failed,
trying it again while that what-if places every pod as it did then (and the candidates, the
NodePools, the instance types and the options are the same objects) fails again. Without this
record every pass would spend its split limit on the same hopeless candidates at the top of
the ranking (and a 10,000-node plan ran two cost-pass repacks per command); with it, the limit
goes to splits not tried yet, and ``decide`` takes the record from pass to pass (the controller
and ``plan`` carry one). Within one pass nothing is asked twice, so a fresh record changes
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from karpenter.core.disruption.candidates import Candidate
from karpenter.core.disruption.simulation import Outcome
from karpenter.core.model.cluster import Cluster, Options
from karpenter.core.provisioning.existing import StateNode

# Past this many records the oldest go (a controller runs for months).
MAX_RECORDS = 50_000


@dataclass(frozen=True, slots=True)
class _Failure:
    states: tuple[StateNode, ...]
    trace: tuple[object, ...]
    inputs: tuple[object, ...]  # the snapshot's NodePools, instance types, DaemonSets; options


@dataclass(slots=True)
class FailedSplits:
    """Splits that failed, by candidate names, with the what-if each one followed."""

    _records: dict[tuple[str, ...], _Failure] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._records)

    def failed(
        self,
        cluster: Cluster,
        options: Options,
        candidates: Sequence[Candidate],
        base: Outcome,
    ) -> bool:
        """Whether this split failed before after the very same one-replacement what-if."""
        record = self._records.get(tuple(c.name for c in candidates))
        if record is None or record.trace != base.trace:
            return False
        now = _inputs(cluster, options)
        if record.inputs[-1] != now[-1] or any(
            a is not b for a, b in zip(record.inputs[:-1], now[:-1], strict=True)
        ):
            return False
        return all(
            s is c.state or s.same_objects(c.state)
            for s, c in zip(record.states, candidates, strict=True)
        )

    def remember(
        self,
        cluster: Cluster,
        options: Options,
        candidates: Sequence[Candidate],
        base: Outcome,
    ) -> None:
        """Record that the split after ``base`` failed."""
        key = tuple(c.name for c in candidates)
        self._records.pop(key, None)
        if len(self._records) >= MAX_RECORDS:
            del self._records[next(iter(self._records))]
        states = tuple(c.state for c in candidates)
        self._records[key] = _Failure(states, base.trace, _inputs(cluster, options))


def _inputs(cluster: Cluster, options: Options) -> tuple[object, ...]:
    return (cluster.nodepools, cluster.instance_types, cluster.daemonsets, options)
