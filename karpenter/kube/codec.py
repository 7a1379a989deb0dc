"""The codec: reading fields of apiserver JSON and building the JSON the controllers write.

Whole objects are decoded into core values by ``karpenter.api.decode`` (the same decoders
``simulate`` uses). Here are the writers: NodeClaims from the solver's decisions, status
conditions, taints, owner and object references, and the small readers they need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from karpenter.api import kube
from karpenter.core.lifecycle import nodepool_hash
from karpenter.core.model import labels as lbl
from karpenter.core.model.nodepool import NodePool
from karpenter.core.model.pod import Pod
from karpenter.core.model.quantity import MILLI
from karpenter.core.model.resources import Resources
from karpenter.core.provisioning.results import NewNodeClaim
from karpenter.core.scheduling.requirements import Requirements
from karpenter.core.scheduling.taints import Taint

Obj = dict[str, Any]
GROUP_VERSION = "karpenter.sh/v1"


# ---- small readers ------------------------------------------------------------------------


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` ({} when absent)."""
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def name(obj: Mapping[str, Any]) -> str:
    """``metadata.name``."""
    return str(meta(obj).get("name") or "")


def namespace(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace``."""
    return str(meta(obj).get("namespace") or "")


def uid(obj: Mapping[str, Any]) -> str:
    """``metadata.uid``."""
    return str(meta(obj).get("uid") or "")


def conditions(obj: Mapping[str, Any]) -> list[Obj]:
    """``status.conditions`` as a new list."""
    status = obj.get("status") or {}
    return [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]


def condition(obj: Mapping[str, Any], kind: str) -> Obj | None:
    """One status condition by type."""
    return next((c for c in conditions(obj) if c.get("type") == kind), None)


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Is the condition ``kind`` True."""
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def rfc3339(when: float) -> str:
    """Epoch seconds as a Kubernetes timestamp (seconds precision, UTC)."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    """A Kubernetes timestamp as epoch seconds."""
    return kube.timestamp(text, "time") if text else None


def set_condition(
    conds: list[Obj], kind: str, status: str, reason: str, message: str, now: float
) -> bool:
    """Set a condition in place (transition time moves only on a status change); changed?"""
    reason = reason or kind
    for cond in conds:
        if cond.get("type") != kind:
            continue
        if (cond.get("status"), cond.get("reason"), cond.get("message")) == (
            status,
            reason,
            message,
        ):
            return False
        if cond.get("status") != status:
            cond["lastTransitionTime"] = rfc3339(now)
        cond.update(status=status, reason=reason, message=message)
        return True
    conds.append(
        {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": rfc3339(now),
        }
    )
    return True


# ---- writers ------------------------------------------------------------------------------


def quantity(milli: int) -> str:
    """Milli-units as a Kubernetes quantity (whole units when exact)."""
    return str(milli // MILLI) if milli % MILLI == 0 else f"{milli}m"


def resource_list(resources: Resources) -> dict[str, str]:
    """A core resource mapping as a ResourceList."""
    return {k: quantity(v) for k, v in sorted(resources.items())}


def taint(t: Taint) -> Obj:
    """A core taint as a v1 Taint."""
    out: Obj = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def requirements(reqs: Requirements) -> list[Obj]:
    """Core requirements as NodeSelectorRequirements (bounds become Gt/Lt)."""
    out: list[Obj] = []
    for key in sorted(reqs):
        req = reqs[key]
        item: Obj = {"key": key, "operator": req.operator}
        if req.values:
            item["values"] = sorted(req.values)
        if req.min_values:
            item["minValues"] = req.min_values
        bounded = req.gte is not None or req.lte is not None
        if not (bounded and req.operator == "Exists"):
            out.append(item)
        if req.gte is not None:
            out.append({"key": key, "operator": "Gt", "values": [str(req.gte - 1)]})
        if req.lte is not None:
            out.append({"key": key, "operator": "Lt", "values": [str(req.lte + 1)]})
    return out


def owner_reference(obj: Mapping[str, Any], *, controller: bool = False) -> Obj:
    """An owner reference to ``obj`` (blocking its deletion until the dependant is gone)."""
    ref: Obj = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": name(obj),
        "uid": uid(obj),
        "blockOwnerDeletion": True,
    }
    if controller:
        ref["controller"] = True
    return ref


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "Never"
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{seconds}s"


def nodeclaim_manifest(
    claim: NewNodeClaim,
    pool: NodePool,
    pool_obj: Mapping[str, Any],
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """The NodeClaim to create for one of the solver's new claims.

    Labels are the template's, the NodePool's, and every requirement with a single value (so
    the claim's scheduling identity survives a restart); the cloud adds instance-type, zone and
    capacity-type once it launched. The finalizer is set at creation, not by a later patch, so
    no instance can ever exist for a claim without it. ``annotations`` are added (a
    disruption replacement names its command).
    """
    body = claim_manifest(
        pool, pool_obj, claim.requirements, claim.requests, claim.min_values_relaxed
    )
    if annotations:
        meta = body["metadata"]
        meta["annotations"] = dict(sorted({**meta["annotations"], **annotations}.items()))
    return body


def claim_manifest(
    pool: NodePool,
    pool_obj: Mapping[str, Any],
    reqs: Requirements,
    requests: Resources,
    min_values_relaxed: bool = False,
) -> Obj:
    """A NodeClaim of ``pool`` with these requirements and requests (static NodePools pass the
    template's own requirements and no requests: the provider picks the instance type)."""
    t = pool.template
    labels = {k: v for k, v in reqs.single_values().items() if k != lbl.HOSTNAME}
    labels.update(t.labels)
    labels[lbl.NODEPOOL] = pool.name
    annotations = dict(t.annotations)
    annotations[lbl.NODEPOOL_HASH] = nodepool_hash(pool)
    annotations[lbl.NODEPOOL_HASH_VERSION] = lbl.NODEPOOL_HASH_VERSION_CURRENT
    if min_values_relaxed:
        annotations[lbl.MIN_VALUES_RELAXED] = "true"
    ref = t.node_class_ref
    spec: Obj = {
        "requirements": requirements(reqs),
        "resources": {"requests": resource_list(requests)},
        "nodeClassRef": {"group": ref.group, "kind": ref.kind, "name": ref.name},
        "expireAfter": _duration(t.expire_after),
    }
    if t.taints:
        spec["taints"] = [taint(x) for x in t.taints]
    if t.startup_taints:
        spec["startupTaints"] = [taint(x) for x in t.startup_taints]
    if t.termination_grace_seconds is not None:
        spec["terminationGracePeriod"] = _duration(t.termination_grace_seconds)
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "NodeClaim",
        "metadata": {
            "generateName": f"{pool.name}-",
            "labels": dict(sorted(labels.items())),
            "annotations": dict(sorted(annotations.items())),
            "finalizers": [lbl.FINALIZER_TERMINATION],
            "ownerReferences": [owner_reference(pool_obj)],
        },
        "spec": spec,
    }


def object_reference(obj: Mapping[str, Any]) -> Obj:
    """An ObjectReference (for Events)."""
    m = meta(obj)
    ref: Obj = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "resourceVersion": m.get("resourceVersion", ""),
    }
    if m.get("namespace"):
        ref["namespace"] = m["namespace"]
    return ref


def pod_reference(p: Pod) -> Obj:
    """An ObjectReference to a core Pod."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": p.namespace,
        "name": p.name,
        "uid": p.uid,
    }


def taints_of(obj: Mapping[str, Any]) -> list[Obj]:
    """``spec.taints`` as a new list."""
    spec = obj.get("spec") or {}
    return [dict(t) for t in spec.get("taints") or [] if isinstance(t, Mapping)]


def same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Taints are identified by key and effect."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def merge_taints(existing: Sequence[Mapping[str, Any]], extra: Sequence[Obj]) -> list[Obj]:
    """``existing`` plus those of ``extra`` not already present (by key and effect)."""
    out = [dict(t) for t in existing]
    for t in extra:
        if not any(same_taint(t, e) for e in out):
            out.append(dict(t))
    return out
