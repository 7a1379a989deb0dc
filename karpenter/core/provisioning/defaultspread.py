"""Cluster-default topology spread: the kube-scheduler's ``defaultConstraints`` applied to pods.

A kube-scheduler configured with ``PodTopologySpread`` default constraints spreads every pod
that declares no constraints of its own, with a label selector it deduces per pod (a
``labelSelector`` is forbidden in the defaults). Karpenter must apply the same constraints,
with the same selector, or it launches capacity the kube-scheduler then refuses to use.

Deduction, as the kube-scheduler's ``DefaultSelector`` does it: the selectors of the Services
in the pod's namespace that select the pod, merged as equality matches, plus the selector of
the pod's controller when it is a ReplicationController, ReplicaSet or StatefulSet. A pod with
no deducible selector stays unconstrained: an empty selector would count every pod in the
namespace. The lookups are the shell's; this module only combines what it is handed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from karpenter.core.model.pod import Owner, Pod, TopologySpread
from karpenter.core.scheduling.selectors import LabelSelector, SelectorExpression

# (apiVersion, kind) of the controllers whose selectors the kube-scheduler adds.
SELECTOR_OWNERS = frozenset(
    {("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")}
)


def selector_owner(pod: Pod) -> Owner | None:
    """The pod's controller when it is one whose selector counts, else None."""
    for owner in pod.owners:
        if owner.controller:
            return owner if (owner.api_version, owner.kind) in SELECTOR_OWNERS else None
    return None


def deduce_selector(
    pod: Pod,
    service_selectors: Iterable[Mapping[str, str] | None],
    owner_selector: LabelSelector | None,
) -> LabelSelector | None:
    """The selector the kube-scheduler would stamp on the pod's default constraints.

    ``service_selectors`` are ``spec.selector`` of every Service in the pod's namespace (None
    for a Service without one: it selects nothing). ``owner_selector`` is the controller's.
    """
    labels: dict[str, str] = {}
    for selector in service_selectors:
        if selector is None:
            continue
        if all(pod.labels.get(k) == v for k, v in selector.items()):
            labels.update(selector)
    expressions: list[SelectorExpression] = []
    if owner_selector is not None:
        # The owner's terms are ANDed onto the Services' (as requirements, not merged into the
        # label map), so a key present in both cannot be overwritten by either side.
        expressions.extend(
            SelectorExpression(k, "In", frozenset({v})) for k, v in owner_selector.match_labels
        )
        expressions.extend(owner_selector.match_expressions)
    if not labels and not expressions:
        return None
    return LabelSelector(tuple(sorted(labels.items())), tuple(expressions))


def apply_defaults(
    pods: Sequence[Pod],
    defaults: Sequence[TopologySpread],
    selector_of: Callable[[Pod], LabelSelector | None],
) -> list[Pod]:
    """The pods with the defaults added where the kube-scheduler would add them.

    All or nothing, as in the kube-scheduler: a pod with any constraint of its own keeps its
    own; a pod whose selector cannot be deduced gets none. Pods are frozen, so the result
    holds new objects for the defaulted ones and the originals for the rest.
    """
    if not defaults:
        return list(pods)
    out: list[Pod] = []
    for pod in pods:
        selector = None if pod.topology_spread else selector_of(pod)
        if selector is None:
            out.append(pod)
            continue
        spread = tuple(dataclasses.replace(c, selector=selector) for c in defaults)
        out.append(dataclasses.replace(pod, topology_spread=spread))
    return out
