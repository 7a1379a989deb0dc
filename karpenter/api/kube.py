"""Fast decoders from Kubernetes objects (plain dicts) to core values.

Pods and Nodes arrive by the tens of thousands, so these are hand-written rather than pydantic
models: each reads only the fields scheduling and disruption use, and raises ``DecodeError``
naming the field path on malformed input.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TypeVar

from karpenter.api.errors import DecodeError
from karpenter.core.model import resources as res
from karpenter.core.model.cluster import DaemonSet
from karpenter.core.model.node import Node
from karpenter.core.model.pod import (
    HostPort,
    Owner,
    Pod,
    PodAffinityTerm,
    SelectorTerm,
    TopologySpread,
    WeightedAffinityTerm,
    WeightedNodeTerm,
)
from karpenter.core.model.quantity import QuantityError, parse_quantity
from karpenter.core.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from karpenter.core.scheduling.requirements import OPERATORS
from karpenter.core.scheduling.selectors import LabelSelector, SelectorExpression
from karpenter.core.scheduling.taints import EFFECTS, Taint, Toleration

Obj = Mapping[str, Any]
T = TypeVar("T")
# The kube-scheduler whose filters the core models (a pod naming another one is judged by it).
DEFAULT_SCHEDULER = "default-scheduler"


def map_of(value: Any, path: str) -> Obj:
    """``value`` as an object ({} when absent)."""
    if type(value) is dict:  # the common case, without an ABC check
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DecodeError(path, f"expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(path, f"expected a list, got {type(value).__name__}")
    return value


def _str_map(value: Any, path: str) -> dict[str, str]:
    if type(value) is dict and all(type(k) is str and type(v) is str for k, v in value.items()):
        return dict(value)
    out = {}
    for k, v in map_of(value, path).items():
        if not isinstance(v, (str, int, float, bool)):
            raise DecodeError(f"{path}.{k}", "expected a string")
        out[str(k)] = v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _int(value: Any, path: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(path, f"expected an integer, got {value!r}")
    return value


def name_of(meta: Obj, path: str = "metadata.name") -> str:
    """``metadata.name``, which every object needs."""
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise DecodeError(path, "required")
    return name


def _each(items: list[Any], path: str, fn: Callable[[Any, str], T]) -> tuple[T, ...]:
    if not items:
        return ()
    return tuple(fn(item, f"{path}[{i}]") for i, item in enumerate(items))


def timestamp(value: Any, path: str) -> float | None:
    """RFC3339 → epoch seconds (None when absent)."""
    if value is None:
        return None
    try:
        when = (
            value
            if isinstance(value, datetime)
            else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        )
    except ValueError:
        raise DecodeError(path, f"invalid timestamp {value!r}") from None
    if when.tzinfo is None:  # Kubernetes timestamps are UTC; never read one as local time
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


# The same few quantity strings recur across thousands of pods; ``typed`` keeps True apart from 1.
_quantity = functools.lru_cache(maxsize=4096, typed=True)(parse_quantity)


def resources(value: Any, path: str) -> dict[str, int]:
    """A resource list in milli-units."""
    out = {}
    for name, quantity in map_of(value, path).items():
        try:
            if not isinstance(quantity, (str, int, float)):
                raise QuantityError(quantity)
            out[str(name)] = _quantity(quantity)
        except QuantityError:
            raise DecodeError(f"{path}.{name}", f"invalid quantity {quantity!r}") from None
    return out


def selector_requirement(value: Any, path: str) -> tuple[str, str, tuple[str, ...], int | None]:
    """A NodeSelectorRequirement as a (key, operator, values, minValues) tuple."""
    obj = map_of(value, path)
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        raise DecodeError(f"{path}.key", "required")
    op = obj.get("operator")
    if op not in OPERATORS:
        raise DecodeError(
            f"{path}.operator", f"invalid operator {op!r} (one of {', '.join(OPERATORS)})"
        )
    values = tuple(str(v) for v in _list(obj.get("values"), f"{path}.values"))
    if op in ("In", "NotIn") and not values:
        raise DecodeError(f"{path}.values", f"operator {op} needs at least one value")
    if op in ("Gt", "Lt", "Gte", "Lte"):
        if len(values) != 1 or not values[0].lstrip("-").isdigit():
            raise DecodeError(f"{path}.values", f"operator {op} needs exactly one integer value")
    min_values = obj.get("minValues")
    if min_values is not None and (
        isinstance(min_values, bool) or not isinstance(min_values, int) or min_values < 1
    ):
        raise DecodeError(f"{path}.minValues", "must be a positive integer")
    return (key, str(op), values, min_values)


def selector_term(value: Any, path: str) -> SelectorTerm:
    """A NodeSelectorTerm's matchExpressions (matchFields is not supported by Karpenter)."""
    obj = map_of(value, path)
    if obj.get("matchFields"):
        raise DecodeError(f"{path}.matchFields", "not supported")
    return _each(
        _list(obj.get("matchExpressions"), f"{path}.matchExpressions"),
        f"{path}.matchExpressions",
        selector_requirement,
    )


def _bound_selector_term(value: Any, path: str) -> SelectorTerm:
    """A bound pod's required term, matchFields dropped. The DaemonSet controller pins each of
    its pods to one node by ``metadata.name``; once bound the pin is met, and the drain and the
    accounting must still see the pod (an undecodable pod is invisible to both)."""
    obj = {k: v for k, v in map_of(value, path).items() if k != "matchFields"}
    return selector_term(obj, path)


def label_selector(value: Any, path: str) -> LabelSelector | None:
    """A metav1.LabelSelector (None when absent)."""
    if value is None:
        return None
    obj = map_of(value, path)
    labels = tuple(sorted(_str_map(obj.get("matchLabels"), f"{path}.matchLabels").items()))
    exprs = []
    for i, raw in enumerate(_list(obj.get("matchExpressions"), f"{path}.matchExpressions")):
        p = f"{path}.matchExpressions[{i}]"
        e = map_of(raw, p)
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise DecodeError(f"{p}.operator", f"invalid operator {op!r}")
        key = e.get("key")
        if not isinstance(key, str) or not key:
            raise DecodeError(f"{p}.key", "required")
        values = frozenset(str(v) for v in _list(e.get("values"), f"{p}.values"))
        if op in ("In", "NotIn") and not values:
            raise DecodeError(f"{p}.values", f"operator {op} needs at least one value")
        exprs.append(SelectorExpression(key, str(op), values))
    return LabelSelector(labels, tuple(exprs))


def taint(value: Any, path: str) -> Taint:
    """A node taint."""
    obj = map_of(value, path)
    effect = obj.get("effect")
    if effect not in EFFECTS:
        raise DecodeError(
            f"{path}.effect", f"invalid effect {effect!r} (one of {', '.join(EFFECTS)})"
        )
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        raise DecodeError(f"{path}.key", "required")
    return Taint(key, str(effect), str(obj.get("value") or ""))


def toleration(value: Any, path: str) -> Toleration:
    """A pod toleration."""
    obj = map_of(value, path)
    op = obj.get("operator") or "Equal"
    if op not in ("Equal", "Exists"):
        raise DecodeError(f"{path}.operator", f"invalid operator {op!r}")
    return Toleration(
        str(obj.get("key") or ""),
        str(op),
        str(obj.get("value") or ""),
        str(obj.get("effect") or ""),
    )


def _affinity_term(value: Any, path: str) -> PodAffinityTerm:
    obj = map_of(value, path)
    key = obj.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise DecodeError(f"{path}.topologyKey", "required")
    return PodAffinityTerm(
        key,
        label_selector(obj.get("labelSelector"), f"{path}.labelSelector"),
        tuple(str(n) for n in _list(obj.get("namespaces"), f"{path}.namespaces")),
        label_selector(obj.get("namespaceSelector"), f"{path}.namespaceSelector"),
        tuple(str(k) for k in _list(obj.get("matchLabelKeys"), f"{path}.matchLabelKeys")),
        tuple(str(k) for k in _list(obj.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys")),
    )


def _weighted(value: Any, path: str) -> WeightedAffinityTerm:
    obj = map_of(value, path)
    return WeightedAffinityTerm(
        _int(obj.get("weight"), f"{path}.weight", 1),
        _affinity_term(obj.get("podAffinityTerm"), f"{path}.podAffinityTerm"),
    )


def _weighted_node(value: Any, path: str) -> WeightedNodeTerm:
    obj = map_of(value, path)
    return WeightedNodeTerm(
        _int(obj.get("weight"), f"{path}.weight", 1),
        selector_term(obj.get("preference"), f"{path}.preference"),
    )


def _spread(value: Any, path: str) -> TopologySpread:
    obj = map_of(value, path)
    skew = obj.get("maxSkew")
    if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
        raise DecodeError(f"{path}.maxSkew", "must be a positive integer")
    key = obj.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise DecodeError(f"{path}.topologyKey", "required")
    when = obj.get("whenUnsatisfiable", "DoNotSchedule")
    if when not in ("DoNotSchedule", "ScheduleAnyway"):
        raise DecodeError(f"{path}.whenUnsatisfiable", f"invalid value {when!r}")
    return TopologySpread(
        key,
        skew,
        str(when),
        label_selector(obj.get("labelSelector"), f"{path}.labelSelector"),
        None if obj.get("minDomains") is None else _int(obj["minDomains"], f"{path}.minDomains"),
        str(obj.get("nodeAffinityPolicy") or "Honor"),
        str(obj.get("nodeTaintsPolicy") or "Ignore"),
        tuple(str(k) for k in _list(obj.get("matchLabelKeys"), f"{path}.matchLabelKeys")),
    )


def _container_requests(c: Obj, path: str) -> dict[str, int]:
    r = map_of(c.get("resources"), f"{path}.resources")
    requests = resources(r.get("requests"), f"{path}.resources.requests")
    limits = resources(r.get("limits"), f"{path}.resources.limits")
    for name, value in limits.items():  # a limit without a request defaults the request
        requests.setdefault(name, value)
    return requests


def _pod_requests(spec: Obj, path: str) -> dict[str, int]:
    containers: list[dict[str, int]] = []
    inits: list[dict[str, int]] = []
    sidecars: list[dict[str, int]] = []
    for i, c in enumerate(_list(spec.get("containers"), f"{path}.containers")):
        containers.append(
            _container_requests(map_of(c, f"{path}.containers[{i}]"), f"{path}.containers[{i}]")
        )
    for i, raw_c in enumerate(_list(spec.get("initContainers"), f"{path}.initContainers")):
        p = f"{path}.initContainers[{i}]"
        c = map_of(raw_c, p)
        request = _container_requests(c, p)
        if c.get("restartPolicy") == "Always":
            containers.append(request)
            sidecars.append(request)
        else:
            # sidecars declared earlier are already running while this init container runs
            inits.append(res.add(request, *sidecars))
    overhead = resources(spec.get("overhead"), f"{path}.overhead")
    total = res.merge_pod_requests(containers, inits, overhead)
    total[res.PODS] = total.get(res.PODS, 0) + 1000  # every pod takes one pod slot
    return total


def _host_ports(spec: Obj, path: str) -> tuple[HostPort, ...]:
    ports = []
    for i, c in enumerate(_list(spec.get("containers"), f"{path}.containers")):
        cp = f"{path}.containers[{i}]"
        for j, raw_p in enumerate(_list(map_of(c, cp).get("ports"), f"{cp}.ports")):
            p = map_of(raw_p, f"{cp}.ports[{j}]")
            if p.get("hostPort"):
                ports.append(
                    HostPort(
                        _int(p["hostPort"], f"{cp}.ports[{j}].hostPort"),
                        str(p.get("protocol") or "TCP"),
                        str(p.get("hostIP") or ""),
                    )
                )
    return tuple(ports)


_NO_AFFINITY: Obj = MappingProxyType(
    {
        f"{kind}_{what}": ()
        for kind in ("required", "preferred")
        for what in ("node_terms", "affinity", "anti_affinity")
    }
)


def _affinity(spec: Obj, path: str) -> Obj:
    if spec.get("affinity") is None:
        return _NO_AFFINITY  # most pods
    aff = map_of(spec.get("affinity"), f"{path}.affinity")
    p = f"{path}.affinity"
    node = map_of(aff.get("nodeAffinity"), f"{p}.nodeAffinity")
    req = map_of(
        node.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{p}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )
    out: dict[str, Any] = {
        "required_node_terms": _each(
            _list(req.get("nodeSelectorTerms"), f"{p}.nodeAffinity.required.nodeSelectorTerms"),
            f"{p}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            _bound_selector_term if spec.get("nodeName") else selector_term,
        ),
        "preferred_node_terms": _each(
            _list(node.get("preferredDuringSchedulingIgnoredDuringExecution"), p),
            f"{p}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            _weighted_node,
        ),
    }
    for field, prefix in (("podAffinity", "affinity"), ("podAntiAffinity", "anti_affinity")):
        block = map_of(aff.get(field), f"{p}.{field}")
        out[f"required_{prefix}"] = _each(
            _list(block.get("requiredDuringSchedulingIgnoredDuringExecution"), p),
            f"{p}.{field}.requiredDuringSchedulingIgnoredDuringExecution",
            _affinity_term,
        )
        out[f"preferred_{prefix}"] = _each(
            _list(block.get("preferredDuringSchedulingIgnoredDuringExecution"), p),
            f"{p}.{field}.preferredDuringSchedulingIgnoredDuringExecution",
            _weighted,
        )
    return out


def _owners(meta: Obj) -> tuple[Owner, ...]:
    return tuple(
        Owner(
            str(o.get("kind", "")),
            str(o.get("name", "")),
            str(o.get("apiVersion", "")),
            bool(o.get("controller")),
        )
        for o in _list(meta.get("ownerReferences"), "metadata.ownerReferences")
        if isinstance(o, Mapping)
    )


def _unschedulable(status: Obj) -> bool:
    for c in _list(status.get("conditions"), "status.conditions"):
        if (
            isinstance(c, Mapping)
            and c.get("type") == "PodScheduled"
            and c.get("status") == "False"
        ):
            return c.get("reason") == "Unschedulable"
    return False


def _awaiting_scheduler(status: Obj, spec: Obj) -> bool:
    judged = any(
        isinstance(c, Mapping) and c.get("type") == "PodScheduled"
        for c in _list(status.get("conditions"), "status.conditions")
    )
    gated = bool(_list(spec.get("schedulingGates"), "spec.schedulingGates"))
    default = str(spec.get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
    return not judged and not gated and default


def pod_spec(spec: Obj, path: str) -> dict[str, Any]:
    """The scheduling-relevant fields of a PodSpec, as Pod keyword arguments."""
    volumes = _list(spec.get("volumes"), f"{path}.volumes")
    pvcs = []
    ephemeral = 0
    for i, raw_v in enumerate(volumes):
        v = map_of(raw_v, f"{path}.volumes[{i}]")
        if "persistentVolumeClaim" in v:
            name = map_of(
                v["persistentVolumeClaim"], f"{path}.volumes[{i}].persistentVolumeClaim"
            ).get("claimName")
            if not name:
                raise DecodeError(
                    f"{path}.volumes[{i}].persistentVolumeClaim.claimName", "required"
                )
            pvcs.append(str(name))
        elif "ephemeral" in v:
            ephemeral += 1
    grace = spec.get("terminationGracePeriodSeconds")
    return {
        "requests": _pod_requests(spec, path),
        "node_name": str(spec.get("nodeName") or ""),
        "node_selector": _str_map(spec.get("nodeSelector"), f"{path}.nodeSelector"),
        "tolerations": _each(
            _list(spec.get("tolerations"), f"{path}.tolerations"), f"{path}.tolerations", toleration
        ),
        "topology_spread": _each(
            _list(spec.get("topologySpreadConstraints"), path),
            f"{path}.topologySpreadConstraints",
            _spread,
        ),
        "host_ports": _host_ports(spec, path),
        "pvc_names": tuple(pvcs),
        "ephemeral_volume_count": ephemeral,
        "priority": _int(spec.get("priority"), f"{path}.priority", 0),
        "priority_class_name": str(spec.get("priorityClassName") or ""),
        "termination_grace_seconds": None
        if grace is None
        else _int(grace, f"{path}.terminationGracePeriodSeconds"),
        **_affinity(spec, path),
    }


def pod(obj: Obj) -> Pod:
    """Decode a v1 Pod."""
    meta = map_of(obj.get("metadata"), "metadata")
    status = map_of(obj.get("status"), "status")
    return Pod(
        namespace=str(meta.get("namespace") or "default"),
        name=name_of(meta),
        uid=str(meta.get("uid") or ""),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        phase=str(status.get("phase") or "Pending"),
        creation=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
        start_time=timestamp(status.get("startTime"), "status.startTime"),
        deleting=meta.get("deletionTimestamp") is not None,
        deletion_time=timestamp(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        owners=_owners(meta),
        unschedulable_condition=_unschedulable(status),
        awaiting_scheduler=_awaiting_scheduler(status, map_of(obj.get("spec"), "spec")),
        nominated_node_name=str(status.get("nominatedNodeName") or ""),
        ready=_condition(status, "Ready", default=False),
        **pod_spec(map_of(obj.get("spec"), "spec"), "spec"),
    )


def _condition(status: Obj, kind: str, *, default: bool) -> bool:
    for c in _list(status.get("conditions"), "status.conditions"):
        if isinstance(c, Mapping) and c.get("type") == kind:
            return c.get("status") == "True"
    return default


def node(obj: Obj) -> Node:
    """Decode a v1 Node (Ready defaults to true when no conditions are given)."""
    meta = map_of(obj.get("metadata"), "metadata")
    spec = map_of(obj.get("spec"), "spec")
    status = map_of(obj.get("status"), "status")
    capacity = resources(status.get("capacity"), "status.capacity")
    return Node(
        name=name_of(meta),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        taints=_each(_list(spec.get("taints"), "spec.taints"), "spec.taints", taint),
        capacity=capacity,
        allocatable=resources(status.get("allocatable"), "status.allocatable") or capacity,
        provider_id=str(spec.get("providerID") or ""),
        ready=_condition(status, "Ready", default=True),
        unschedulable=bool(spec.get("unschedulable")),
        creation=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
        deleting=meta.get("deletionTimestamp") is not None,
    )


def daemonset(obj: Obj) -> DaemonSet:
    """Decode an apps/v1 DaemonSet (its template becomes a pod value)."""
    meta = map_of(obj.get("metadata"), "metadata")
    tmpl = map_of(map_of(obj.get("spec"), "spec").get("template"), "spec.template")
    tmeta = map_of(tmpl.get("metadata"), "spec.template.metadata")
    ns = str(meta.get("namespace") or "default")
    name = name_of(meta)
    template = Pod(
        namespace=ns,
        name=f"{name}-template",
        labels=_str_map(tmeta.get("labels"), "spec.template.metadata.labels"),
        owners=(Owner("DaemonSet", name, "apps/v1", True),),
        **pod_spec(map_of(tmpl.get("spec"), "spec.template.spec"), "spec.template.spec"),
    )
    return DaemonSet(ns, name, template)


def pvc(obj: Obj) -> PersistentVolumeClaim:
    """Decode a v1 PersistentVolumeClaim."""
    meta = map_of(obj.get("metadata"), "metadata")
    spec = map_of(obj.get("spec"), "spec")
    return PersistentVolumeClaim(
        str(meta.get("namespace") or "default"),
        name_of(meta),
        str(spec.get("storageClassName") or ""),
        str(spec.get("volumeName") or ""),
        meta.get("deletionTimestamp") is not None,
    )


def pv(obj: Obj) -> PersistentVolume:
    """Decode a v1 PersistentVolume."""
    meta = map_of(obj.get("metadata"), "metadata")
    spec = map_of(obj.get("spec"), "spec")
    required = map_of(
        map_of(spec.get("nodeAffinity"), "spec.nodeAffinity").get("required"),
        "spec.nodeAffinity.required",
    )
    terms = _each(
        _list(required.get("nodeSelectorTerms"), "spec.nodeAffinity.required.nodeSelectorTerms"),
        "spec.nodeAffinity.required.nodeSelectorTerms",
        selector_term,
    )
    driver = str(map_of(spec.get("csi"), "spec.csi").get("driver") or "")
    if not driver and "awsElasticBlockStore" in spec:
        driver = "ebs.csi.aws.com"
    return PersistentVolume(
        name_of(meta),
        terms,
        driver,
        str(spec.get("storageClassName") or ""),
        "local" in spec or "hostPath" in spec,
    )


def storage_class(obj: Obj) -> StorageClass:
    """Decode a storage.k8s.io/v1 StorageClass (allowedTopologies become In terms)."""
    meta = map_of(obj.get("metadata"), "metadata")
    terms = []
    for i, t in enumerate(_list(obj.get("allowedTopologies"), "allowedTopologies")):
        exprs = []
        tp = f"allowedTopologies[{i}].matchLabelExpressions"
        for j, raw_e in enumerate(
            _list(map_of(t, f"allowedTopologies[{i}]").get("matchLabelExpressions"), tp)
        ):
            e = map_of(raw_e, f"{tp}[{j}]")
            key = e.get("key")
            if not isinstance(key, str) or not key:
                raise DecodeError(f"{tp}[{j}].key", "required")
            values = tuple(str(v) for v in _list(e.get("values"), f"{tp}[{j}].values"))
            exprs.append((key, "In", values, None))
        terms.append(tuple(exprs))
    return StorageClass(
        name_of(meta),
        str(obj.get("provisioner") or ""),
        str(obj.get("volumeBindingMode") or "Immediate"),
        tuple(terms),
    )


def csinode(obj: Obj) -> CSINode:
    """Decode a storage.k8s.io/v1 CSINode's per-driver attach limits."""
    meta = map_of(obj.get("metadata"), "metadata")
    limits = {}
    for i, raw_d in enumerate(
        _list(map_of(obj.get("spec"), "spec").get("drivers"), "spec.drivers")
    ):
        d = map_of(raw_d, f"spec.drivers[{i}]")
        count = map_of(d.get("allocatable"), f"spec.drivers[{i}].allocatable").get("count")
        if count is not None:
            limits[name_of(d, f"spec.drivers[{i}].name")] = _int(
                count, f"spec.drivers[{i}].allocatable.count"
            )
    return CSINode(name_of(meta), limits)
