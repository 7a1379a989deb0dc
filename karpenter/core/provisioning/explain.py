"""Reasons a person can act on, for pods a pass could not place.

Only failed pods pay for this: the hot path records bare rejection kinds, and this module
re-asks each NodePool, in weight order, the first question it fails for the pod, with numbers
("no instance type has 200 cpu; largest allocatable is 95.69", "NodePool gpu: limits cpu=100
exceeded", "incompatible with NodePool default: requirement ... vs NodePool ...").

Near misses come first: the pools the pod could use but that lacked room, limits or a topology
domain are what a person can act on, while "incompatible with" clauses only say which pools were
never meant for the pod (a cluster with twenty pools would otherwise bury the one that matters).
"""

from __future__ import annotations

from karpenter.core.model import resources as res
from karpenter.core.provisioning.build import PassContext
from karpenter.core.provisioning.podwork import PodWork
from karpenter.core.provisioning.targets import Claim, Template, try_claim
from karpenter.core.provisioning.topology import Reject
from karpenter.core.provisioning.volumes import PodVolumes
from karpenter.core.scheduling.requirements import Requirements
from karpenter.core.scheduling.taints import untolerated

_INCOMPATIBLE = "incompatible with NodePool "


def reason(ctx: PassContext, work: PodWork, volumes: PodVolumes) -> str:
    """Why ``work`` fits no NodePool (one clause per pool, joined by '; ')."""
    if not ctx.templates:
        if ctx.skipped_pools:
            return "; ".join(f"NodePool {n}: {why}" for n, why in sorted(ctx.skipped_pools.items()))
        return "no NodePool is ready to provision nodes"
    single = len(ctx.templates) == 1
    parts = [_template_reason(ctx, t, work, volumes, single) for t in ctx.templates]
    # stable: weight order within near misses and within incompatibilities
    parts.sort(key=lambda part: part.startswith(_INCOMPATIBLE))
    return "; ".join(parts)


def _requirement_conflict(template: Template, work: PodWork) -> str | None:
    pool = template.nodepool.name
    reqs = template.requirements
    undefined = reqs.undefined_keys(work.requirements, template.well_known)
    if undefined:
        return f"{_INCOMPATIBLE}{pool}: label {undefined[0]} does not have known values"
    for key, wanted in sorted(work.requirements.items()):
        mine = reqs.get(key)
        if mine is None:
            continue
        if Requirements((mine,)).conflicts(Requirements((wanted,))):
            theirs = mine.describe().removeprefix(f"{key} ")
            return f"{_INCOMPATIBLE}{pool}: requirement {wanted.describe()} vs NodePool {theirs}"
    return None


def _resource_reason(template: Template, work: PodWork, compat: int, single: bool) -> str:
    requests = work.pod.requests
    names = sorted(n for n, v in requests.items() if v > 0)
    largest = template.catalog.max_allocatable(compat, names)
    prefix = "" if single else f"NodePool {template.nodepool.name}: "
    over = [n for n in names if requests[n] > largest[n]]
    if over:
        name = over[0]
        want = res.describe({name: requests[name]}).split("=")[1]
        have = res.describe({name: largest[name]}).split("=")[1]
        return f"{prefix}no instance type has {want} {name}; largest allocatable is {have}"
    overhead = res.minimum(g.overhead for g in template.daemon_groups)
    return f"{prefix}no instance type fits {res.describe(requests)} together" + (
        f" with daemonset overhead {res.describe(overhead)}" if overhead else ""
    )


def _template_reason(
    ctx: PassContext,
    template: Template,
    work: PodWork,
    volumes: PodVolumes,
    single: bool,
) -> str:
    pool = template.nodepool.name
    bad = untolerated(template.taints, work.tolerations)
    if bad:
        return f"{_INCOMPATIBLE}{pool}: did not tolerate taint {bad[0].describe()}"
    conflict = _requirement_conflict(template, work)
    if conflict:
        return conflict
    merged = template.requirements.intersect(work.requirements)
    compat = template.base_mask & template.catalog.compatible(merged)
    if not compat:
        return (
            f"{_INCOMPATIBLE}{pool}: no instance type with an available offering "
            f"satisfies {work.requirements.describe() or 'the NodePool requirements'}"
        )
    fit = compat & template.fit_mask(work.pod.requests, work.pod.host_ports)
    if not fit:
        return _resource_reason(template, work, compat, single)
    exceeded = ctx.limits.exceeded(template, fit)
    if exceeded:
        return f"NodePool {pool}: limits {', '.join(exceeded)} exceeded"
    probe = Claim(template, "hostname-placeholder-probe", template.requirements, template.base_mask)
    groups = ctx.pod_groups(work)
    outcome = try_claim(probe, work, groups, volumes, ctx.topology)
    if isinstance(outcome, Reject):
        detail = outcome.detail or outcome.kind
        if outcome.kind == "volumes":
            detail = "volume topology conflicts with the NodePool or instance types"
        if outcome.kind == "min-values":
            detail = "minValues cannot be met by the instance types that fit"
        return f"NodePool {pool}: {detail}"
    return f"NodePool {pool}: could not be placed in this pass (constraints among pending pods)"
