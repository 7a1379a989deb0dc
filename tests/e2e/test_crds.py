"""CRD schema truth table: config/crd/ defaults and validation rules, judged by a real apiserver."""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.e2e

GROUP = "karpenter.sh"
_VERSIONS = {"NodePool": "v1", "NodeClaim": "v1", "NodeOverlay": "v1alpha1"}
_PLURALS = {"NodePool": "nodepools", "NodeClaim": "nodeclaims", "NodeOverlay": "nodeoverlays"}

_NODE_CLASS_REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
_ARCH_IN = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}


def _base(kind: str) -> dict[str, Any]:
    """The smallest valid object of each kind; cases merge their differences into it."""
    spec: dict[str, Any]
    if kind == "NodePool":
        spec = {"template": {"spec": {"nodeClassRef": _NODE_CLASS_REF, "requirements": [_ARCH_IN]}}}
    elif kind == "NodeClaim":
        spec = {"nodeClassRef": _NODE_CLASS_REF, "requirements": [_ARCH_IN]}
    else:
        spec = {"requirements": [_ARCH_IN]}
    return {
        "apiVersion": f"{GROUP}/{_VERSIONS[kind]}",
        "kind": kind,
        "metadata": {"name": f"case-{uuid.uuid4().hex[:10]}"},
        "spec": copy.deepcopy(spec),
    }


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    # JSON-merge-patch semantics (None deletes, lists replace) keep the table rows short.
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def _requirements(*reqs: dict[str, Any]) -> dict[str, Any]:
    return {"template": {"spec": {"requirements": list(reqs)}}}


def _budgets(*budgets: dict[str, Any]) -> dict[str, Any]:
    return {"disruption": {"budgets": list(budgets)}}


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    spec: dict[str, Any]
    error: str | None = None  # fragment of the apiserver's rejection message; None = accepted
    expect: dict[str, Any] = field(default_factory=dict)  # dotted path -> value after defaulting


CREATE_CASES = [
    # --- NodePool: accepted, with defaults ------------------------------------------------------
    Case(
        "nodepool-defaults",
        "NodePool",
        {},
        expect={
            "spec.disruption.consolidateAfter": "0s",
            "spec.disruption.consolidationPolicy": "WhenEmptyOrUnderutilized",
            "spec.disruption.budgets": [{"nodes": "10%"}],
            "spec.template.spec.expireAfter": "720h",
        },
    ),
    Case(
        "nodepool-budget-nodes-default",
        "NodePool",
        _budgets({"schedule": "@daily", "duration": "10m", "reasons": ["Drifted"]}),
        expect={"spec.disruption.budgets.0.nodes": "10%"},
    ),
    Case(
        "nodepool-explicit-values-kept",
        "NodePool",
        {
            "disruption": {"consolidateAfter": "Never", "consolidationPolicy": "WhenEmpty"},
            "template": {"spec": {"expireAfter": "Never", "terminationGracePeriod": "1h30m"}},
            "weight": 100,
            "limits": {"cpu": "1000", "memory": "1000Gi"},
        },
        expect={
            "spec.disruption.consolidateAfter": "Never",
            "spec.template.spec.expireAfter": "Never",
            "spec.disruption.budgets": [{"nodes": "10%"}],
        },
    ),
    Case(
        "nodepool-capacity-type-minvalues-ok",
        "NodePool",
        _requirements(
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["a", "b"],
                "minValues": 2,
            },
            {"key": "example.com/generation", "operator": "Gt", "values": ["5"]},
            {"key": "example.com/size", "operator": "Lte", "values": ["0"]},
            {"key": "example.com/team", "operator": "Exists"},
        ),
    ),
    Case(
        "nodepool-labels-taints-ok",
        "NodePool",
        {
            "template": {
                "metadata": {"labels": {"team": "a", "karpenter.sh/capacity-type": "spot"}},
                "spec": {
                    "taints": [{"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}],
                    "startupTaints": [{"key": "example.com/init", "effect": "NoExecute"}],
                },
            }
        },
    ),
    Case(
        "nodepool-static-ok",
        "NodePool",
        {"replicas": 3, "limits": {"nodes": "5"}},
        expect={"spec.replicas": 3},
    ),
    # --- NodePool: requirement rules -------------------------------------------------------------
    Case(
        "in-needs-values",
        "NodePool",
        _requirements({"key": "kubernetes.io/arch", "operator": "In"}),
        error="requirements with operator 'In' must have a value defined",
    ),
    Case(
        "in-empty-values",
        "NodePool",
        _requirements({"key": "kubernetes.io/arch", "operator": "In", "values": []}),
        error="requirements with operator 'In' must have a value defined",
    ),
    Case(
        "gt-not-integer",
        "NodePool",
        _requirements({"key": "example.com/gen", "operator": "Gt", "values": ["abc"]}),
        error="must have a single positive integer value",
    ),
    Case(
        "lt-two-values",
        "NodePool",
        _requirements({"key": "example.com/gen", "operator": "Lt", "values": ["1", "2"]}),
        error="must have a single positive integer value",
    ),
    Case(
        "gte-negative",
        "NodePool",
        _requirements({"key": "example.com/gen", "operator": "Gte", "values": ["-1"]}),
        error="must have a single positive integer value",
    ),
    Case(
        "minvalues-more-than-values",
        "NodePool",
        _requirements(
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 2}
        ),
        error="must have at least that many values specified in the 'values' field",
    ),
    Case(
        "minvalues-max-50",
        "NodePool",
        _requirements({"key": "example.com/x", "operator": "Exists", "minValues": 51}),
        error="should be less than or equal to 50",
    ),
    Case(
        "unknown-operator",
        "NodePool",
        _requirements({"key": "kubernetes.io/arch", "operator": "Near", "values": ["a"]}),
        error="Unsupported value",
    ),
    Case(
        "karpenter-domain-restricted",
        "NodePool",
        _requirements({"key": "karpenter.sh/custom", "operator": "Exists"}),
        error='label domain "karpenter.sh" is restricted',
    ),
    Case(
        "karpenter-subdomain-restricted",
        "NodePool",
        _requirements({"key": "team.karpenter.sh/custom", "operator": "Exists"}),
        error='label domain "karpenter.sh" is restricted',
    ),
    Case(
        "nodepool-key-rejected-in-nodepool",
        "NodePool",
        _requirements({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}),
        error='label "karpenter.sh/nodepool" is restricted',
    ),
    Case(
        "hostname-requirement-restricted",
        "NodePool",
        _requirements({"key": "kubernetes.io/hostname", "operator": "In", "values": ["x"]}),
        error='label "kubernetes.io/hostname" is restricted',
    ),
    Case(
        "requirement-value-pattern",
        "NodePool",
        _requirements({"key": "kubernetes.io/arch", "operator": "In", "values": ["-bad-"]}),
        error="should match",
    ),
    # --- NodePool: labels, taints, nodeClassRef, scalars ----------------------------------------
    Case(
        "label-karpenter-domain-restricted",
        "NodePool",
        {"template": {"metadata": {"labels": {"karpenter.sh/custom": "x"}}}},
        error='label domain "karpenter.sh" is restricted',
    ),
    Case(
        "label-nodepool-restricted",
        "NodePool",
        {"template": {"metadata": {"labels": {"karpenter.sh/nodepool": "x"}}}},
        error='label "karpenter.sh/nodepool" is restricted',
    ),
    Case(
        "label-hostname-restricted",
        "NodePool",
        {"template": {"metadata": {"labels": {"kubernetes.io/hostname": "x"}}}},
        error='label "kubernetes.io/hostname" is restricted',
    ),
    Case(
        "label-value-too-long",
        "NodePool",
        {"template": {"metadata": {"labels": {"team": "a" * 64}}}},
        error="Too long",
    ),
    Case(
        "taint-bad-effect",
        "NodePool",
        {"template": {"spec": {"taints": [{"key": "a", "effect": "Sometimes"}]}}},
        error="Unsupported value",
    ),
    Case(
        "taint-empty-key",
        "NodePool",
        {"template": {"spec": {"startupTaints": [{"key": "", "effect": "NoSchedule"}]}}},
        error="startupTaints[0].key in body should be at least 1 chars long",
    ),
    Case(
        "nodeclassref-group-slash",
        "NodePool",
        {"template": {"spec": {"nodeClassRef": {"group": "a/b"}}}},
        error="should match '^[^/]*$'",
    ),
    Case(
        "nodeclassref-kind-empty",
        "NodePool",
        {"template": {"spec": {"nodeClassRef": {"kind": ""}}}},
        error="kind may not be empty",
    ),
    Case(
        "expireafter-days-rejected",
        "NodePool",
        {"template": {"spec": {"expireAfter": "1d"}}},
        error="spec.template.spec.expireAfter",
    ),
    Case(
        "tgp-never-rejected",
        "NodePool",
        {"template": {"spec": {"terminationGracePeriod": "Never"}}},
        error="spec.template.spec.terminationGracePeriod",
    ),
    Case("weight-max-100", "NodePool", {"weight": 101}, error="less than or equal to 100"),
    Case("weight-min-1", "NodePool", {"weight": 0}, error="greater than or equal to 1"),
    Case(
        "consolidation-policy-enum",
        "NodePool",
        {"disruption": {"consolidationPolicy": "Sometimes"}},
        error="Unsupported value",
    ),
    Case(
        "consolidate-after-pattern",
        "NodePool",
        {"disruption": {"consolidateAfter": "5 minutes"}},
        error="spec.disruption.consolidateAfter",
    ),
    # --- NodePool: budgets -----------------------------------------------------------------------
    Case(
        "budget-schedule-needs-duration",
        "NodePool",
        _budgets({"nodes": "1", "schedule": "@daily"}),
        error="'schedule' must be set with 'duration'",
    ),
    Case(
        "budget-duration-needs-schedule",
        "NodePool",
        _budgets({"nodes": "1", "duration": "1h"}),
        error="'schedule' must be set with 'duration'",
    ),
    Case(
        "budget-nodes-over-100-percent",
        "NodePool",
        _budgets({"nodes": "110%"}),
        error="spec.disruption.budgets[0].nodes",
    ),
    Case(
        "budget-duration-no-seconds",
        "NodePool",
        _budgets({"nodes": "1", "schedule": "0 9 * * 1-5", "duration": "30s"}),
        error="spec.disruption.budgets[0].duration",
    ),
    Case(
        "budget-reason-enum",
        "NodePool",
        _budgets({"nodes": "1", "reasons": ["Expired"]}),
        error="Unsupported value",
    ),
    # --- NodePool: static capacity ---------------------------------------------------------------
    Case(
        "static-rejects-weight",
        "NodePool",
        {"replicas": 1, "weight": 10},
        error="'weight' is not supported on static NodePools",
    ),
    Case(
        "static-limits-nodes-only",
        "NodePool",
        {"replicas": 1, "limits": {"cpu": "10"}},
        error="only 'limits.nodes' is supported on static NodePools",
    ),
    Case("replicas-non-negative", "NodePool", {"replicas": -1}, error="greater than or equal"),
    # --- NodeClaim -------------------------------------------------------------------------------
    Case(
        "nodeclaim-defaults-and-nodepool-key",
        "NodeClaim",
        {
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                _ARCH_IN,
            ],
            "resources": {"requests": {"cpu": "1500m", "pods": 3}},
        },
        expect={"spec.expireAfter": "720h"},
    ),
    Case(
        "nodeclaim-hostname-restricted",
        "NodeClaim",
        {"requirements": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]},
        error='label "kubernetes.io/hostname" is restricted',
    ),
    Case(
        "nodeclaim-karpenter-domain-restricted",
        "NodeClaim",
        {"requirements": [{"key": "karpenter.sh/other", "operator": "Exists"}]},
        error='label domain "karpenter.sh" is restricted',
    ),
    Case(
        "nodeclaim-needs-nodeclassref",
        "NodeClaim",
        {"nodeClassRef": None},
        error="spec.nodeClassRef: Required value",
    ),
    # --- NodeOverlay -----------------------------------------------------------------------------
    Case(
        "overlay-price-ok",
        "NodeOverlay",
        {
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}
            ],
            "price": "0.25",
            "weight": 10000,
        },
        expect={"spec.price": "0.25"},
    ),
    Case(
        "overlay-price-adjustment-percent-ok",
        "NodeOverlay",
        {"priceAdjustment": "-15%", "capacity": {"example.com/fuse": "1"}},
    ),
    Case("overlay-price-adjustment-delta-ok", "NodeOverlay", {"priceAdjustment": "+0.5"}),
    Case("overlay-price-adjustment-minus-100-ok", "NodeOverlay", {"priceAdjustment": "-100%"}),
    Case(
        "overlay-price-and-adjustment-exclusive",
        "NodeOverlay",
        {"price": "1", "priceAdjustment": "+1"},
        error="cannot set both 'price' and 'priceAdjustment'",
    ),
    Case(
        "overlay-adjustment-below-minus-100",
        "NodeOverlay",
        {"priceAdjustment": "-101%"},
        error="spec.priceAdjustment",
    ),
    Case(
        "overlay-adjustment-needs-sign",
        "NodeOverlay",
        {"priceAdjustment": "10%"},
        error="spec.priceAdjustment",
    ),
    Case("overlay-price-pattern", "NodeOverlay", {"price": "-1"}, error="spec.price"),
    Case(
        "overlay-capacity-rejects-cpu",
        "NodeOverlay",
        {"capacity": {"cpu": "1"}},
        error="invalid resource restricted",
    ),
    Case(
        "overlay-capacity-rejects-pods",
        "NodeOverlay",
        {"capacity": {"pods": "10"}},
        error="invalid resource restricted",
    ),
    Case(
        "overlay-notin-needs-values",
        "NodeOverlay",
        {"requirements": [{"key": "kubernetes.io/arch", "operator": "NotIn"}]},
        error="requirements with operator 'In' or 'NotIn' must have a value defined",
    ),
    Case(
        "overlay-weight-max",
        "NodeOverlay",
        {"weight": 10001},
        error="less than or equal to 10000",
    ),
    Case(
        "overlay-hostname-restricted",
        "NodeOverlay",
        {"requirements": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]},
        error='label "kubernetes.io/hostname" is restricted',
    ),
]


def _objects(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


async def _create(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    kind = body["kind"]
    created: dict[str, Any] = await _objects(api).create_cluster_custom_object(
        GROUP, _VERSIONS[kind], _PLURALS[kind], body
    )
    return created


async def _replace(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    kind, name = body["kind"], body["metadata"]["name"]
    replaced: dict[str, Any] = await _objects(api).replace_cluster_custom_object(
        GROUP, _VERSIONS[kind], _PLURALS[kind], name, body
    )
    return replaced


def _rejection(exc: ApiException) -> str:
    if exc.body is None:
        return str(exc)
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.body)


@pytest.mark.asyncio
@pytest.mark.parametrize("case", CREATE_CASES, ids=[c.id for c in CREATE_CASES])
async def test_create(api: client.ApiClient, case: Case) -> None:
    body = _base(case.kind)
    _merge(body["spec"], case.spec)
    if case.error is None:
        created = await _create(api, body)
        for path, want in case.expect.items():
            assert _get(created, path) == want, path
        return
    with pytest.raises(ApiException) as info:
        await _create(api, body)
    assert info.value.status == 422, _rejection(info.value)
    assert case.error in _rejection(info.value)


@dataclass(frozen=True)
class UpdateCase:
    id: str
    kind: str
    change: dict[str, Any]
    error: str | None
    initial: dict[str, Any] = field(default_factory=dict)


UPDATE_CASES = [
    UpdateCase(
        "nodeclassref-group-immutable",
        "NodePool",
        {"template": {"spec": {"nodeClassRef": {"group": "other.example.com"}}}},
        "nodeClassRef.group is immutable",
    ),
    UpdateCase(
        "nodeclassref-kind-immutable",
        "NodePool",
        {"template": {"spec": {"nodeClassRef": {"kind": "OtherNodeClass"}}}},
        "nodeClassRef.kind is immutable",
    ),
    UpdateCase(
        "nodeclassref-name-mutable",
        "NodePool",
        {"template": {"spec": {"nodeClassRef": {"name": "other"}}}},
        None,
    ),
    UpdateCase(
        "dynamic-to-static-rejected",
        "NodePool",
        {"replicas": 2},
        "Cannot transition NodePool between static (replicas set) and dynamic",
    ),
    UpdateCase(
        "static-to-dynamic-rejected",
        "NodePool",
        {"replicas": None},
        "Cannot transition NodePool between static (replicas set) and dynamic",
        initial={"replicas": 1},
    ),
    UpdateCase("static-scale-ok", "NodePool", {"replicas": 5}, None, initial={"replicas": 1}),
    UpdateCase(
        "nodeclaim-spec-immutable",
        "NodeClaim",
        {"expireAfter": "1h"},
        "spec is immutable",
    ),
    UpdateCase("overlay-spec-mutable", "NodeOverlay", {"price": "3"}, None),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("case", UPDATE_CASES, ids=[c.id for c in UPDATE_CASES])
async def test_update(api: client.ApiClient, case: UpdateCase) -> None:
    body = _base(case.kind)
    _merge(body["spec"], case.initial)
    current = await _create(api, body)
    _merge(current["spec"], case.change)
    if case.error is None:
        await _replace(api, current)
        return
    with pytest.raises(ApiException) as info:
        await _replace(api, current)
    assert info.value.status == 422, _rejection(info.value)
    assert case.error in _rejection(info.value)


@pytest.mark.asyncio
async def test_nodepool_scale_subresource(api: client.ApiClient) -> None:
    body = _base("NodePool")
    body["spec"]["replicas"] = 4
    created = await _create(api, body)
    scale = await _objects(api).get_cluster_custom_object_scale(
        GROUP, "v1", "nodepools", created["metadata"]["name"]
    )
    assert scale["spec"]["replicas"] == 4


@pytest.mark.asyncio
async def test_status_subresource_accepts_conditions(api: client.ApiClient) -> None:
    created = await _create(api, _base("NodeClaim"))
    created["status"] = {
        "nodeName": "node-a",
        "providerID": "kwok://node-a",
        "capacity": {"cpu": "4"},
        "conditions": [
            {
                "type": "Launched",
                "status": "True",
                "reason": "Launched",
                "message": "",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
    }
    updated = await _objects(api).replace_cluster_custom_object_status(
        GROUP, "v1", "nodeclaims", created["metadata"]["name"], created
    )
    assert updated["status"]["nodeName"] == "node-a"
    assert updated["status"]["conditions"][0]["type"] == "Launched"


@pytest.mark.asyncio
async def test_printer_columns_and_categories(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    nodepools = await ext.read_custom_resource_definition("nodepools.karpenter.sh")
    columns = [c.name for c in nodepools.spec.versions[0].additional_printer_columns]
    assert columns == ["NodeClass", "Nodes", "Ready", "Age", "Weight", "CPU", "Memory"]
    assert nodepools.spec.names.categories == ["karpenter"]
    overlays = await ext.read_custom_resource_definition("nodeoverlays.karpenter.sh")
    assert overlays.spec.names.short_names == ["overlays"]
