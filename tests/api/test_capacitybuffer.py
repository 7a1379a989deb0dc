"""CapacityBuffer resolution (api.capacitybuffer): which object holds the chunk, the buffer and
status resolved from it, and a clear ReadyForProvisioning=False naming the field otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.api import capacitybuffer as cb
from karpenter.api.errors import DecodeError
from karpenter.core import buffers


def _buffer(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": cb.GROUP_VERSION,
        "kind": "CapacityBuffer",
        "metadata": {"name": "web", "namespace": "team", "uid": "u1", "generation": 3},
        "spec": spec,
    }


def _template(cpu: str = "500m") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }


def _workload(kind: str, replicas: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": _template()}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "api"}, "spec": spec}


def _resolve(obj: dict[str, Any], found: dict[str, Any] | None) -> cb.Resolution:
    spec = cb.spec_of(obj)
    src = cb.source(spec)
    assert isinstance(src, cb.Source)
    return cb.resolve(spec, src, found)


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "ReplicaSet"])
def test_scalable_ref_takes_the_workloads_template_and_replicas(kind: str) -> None:
    """A scalableRef buffer's chunk is the workload's spec.template and percentage is taken of
    its spec.replicas (30% of 7 → 3 chunks); status names no PodTemplate."""
    obj = _buffer(scalableRef={"apiGroup": "apps", "kind": kind, "name": "api"}, percentage=30)
    got = _resolve(obj, _workload(kind, 7))
    assert got.ready and got.buffer is not None
    assert (got.reason, got.message) == ("Resolved", "Pod template resolved successfully")
    assert got.buffer.scalable_replicas == 7
    assert got.status["replicas"] == 3
    assert got.status["podTemplateRef"] is None and got.status["podTemplateGeneration"] is None
    pods = buffers.virtual_pods(got.buffer)
    assert [(p.name, p.requests["cpu"], p.labels["app"]) for p in pods] == [
        ("capacity-buffer-web-1", 500, "web"),
        ("capacity-buffer-web-2", 500, "web"),
        ("capacity-buffer-web-3", 500, "web"),
    ]


def test_scalable_ref_defaults() -> None:
    """An empty apiGroup means apps, and a workload without spec.replicas counts as 1 replica
    (what its scale subresource reports), so 50% of it is one chunk; replicas wins when larger."""
    ref = {"kind": "Deployment", "name": "api"}
    assert (
        _resolve(_buffer(scalableRef=ref, percentage=50), _workload("Deployment", None)).status[
            "replicas"
        ]
        == 1
    )
    got = _resolve(_buffer(scalableRef=ref, percentage=50, replicas=4), _workload("Deployment", 2))
    assert got.status["replicas"] == 4


def test_pod_template_ref_status() -> None:
    """A podTemplateRef buffer reports the template's name and generation; percentage has no
    workload to apply to, so replicas alone count."""
    template = {"metadata": {"name": "chunk", "generation": 2}, "template": _template("1")}
    got = _resolve(_buffer(podTemplateRef={"name": "chunk"}, replicas=2, percentage=50), template)
    assert got.status == {
        "provisioningStrategy": cb.ACTIVE_CAPACITY,
        "replicas": 2,
        "podTemplateRef": {"name": "chunk"},
        "podTemplateGeneration": 2,
    }


@pytest.mark.parametrize(
    ("spec", "reason", "message"),
    [
        pytest.param(
            {"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "j"}},
            "ResolutionFailed",
            'unsupported scalableRef API group "batch" in spec.scalableRef.apiGroup'
            ' (supported: "apps")',
            id="group",
        ),
        pytest.param(
            {"scalableRef": {"apiGroup": "apps", "kind": "DaemonSet", "name": "d"}},
            "ResolutionFailed",
            'unsupported kind "DaemonSet" in spec.scalableRef.kind'
            " (supported: Deployment, ReplicaSet, StatefulSet)",
            id="kind",
        ),
        pytest.param(
            {"podTemplateRef": {"name": "t"}, "provisioningStrategy": "example.com/other"},
            "ResolutionFailed",
            'unsupported provisioningStrategy "example.com/other" in spec.provisioningStrategy'
            ' (supported: "buffer.x-k8s.io/active-capacity")',
            id="strategy",
        ),
        pytest.param(
            {"replicas": 1},
            "ResolutionFailed",
            "Neither podTemplateRef nor scalableRef is set",
            id="no-reference",
        ),
    ],
)
def test_unsupported_buffers_say_which_field(
    spec: dict[str, Any], reason: str, message: str
) -> None:
    """A buffer this controller cannot resolve gets ReadyForProvisioning=False with a message
    naming the field at fault, and no virtual pods."""
    got = cb.source(cb.spec_of(_buffer(**spec)))
    assert isinstance(got, cb.Resolution)
    assert (got.ready, got.reason, got.message) == (False, reason, message)


@pytest.mark.parametrize(
    ("ref", "reason", "message"),
    [
        pytest.param(
            {"podTemplateRef": {"name": "chunk"}},
            "PodTemplateNotFound",
            'podtemplates "chunk" not found',
            id="podtemplate",
        ),
        pytest.param(
            {"scalableRef": {"apiGroup": "apps", "kind": "StatefulSet", "name": "db"}},
            "ScalableRefNotFound",
            'statefulsets.apps "db" not found',
            id="statefulset",
        ),
    ],
)
def test_missing_objects_are_reported_as_the_apiserver_does(
    ref: dict[str, Any], reason: str, message: str
) -> None:
    """A reference to an object that does not exist gives upstream's NotFound reason and the
    apiserver's message."""
    got = _resolve(_buffer(**ref), None)
    assert (got.ready, got.reason, got.message) == (False, reason, message)


def test_malformed_workload_template_names_the_field() -> None:
    """A workload whose pod template cannot be read is ResolutionFailed naming the field."""
    workload = _workload("Deployment", 2)
    workload["spec"]["template"]["spec"]["containers"] = "oops"
    got = _resolve(_buffer(scalableRef={"kind": "Deployment", "name": "api"}), workload)
    assert (got.ready, got.reason) == (False, "ResolutionFailed")
    assert "spec.template.spec.containers" in got.message


def test_invalid_counts_are_decode_errors() -> None:
    """A negative percentage is rejected naming spec.percentage."""
    with pytest.raises(DecodeError, match=r"spec\.percentage"):
        cb.spec_of(_buffer(podTemplateRef={"name": "t"}, percentage=-1))
