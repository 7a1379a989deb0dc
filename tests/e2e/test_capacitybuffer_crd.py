"""The CapacityBuffer CRD on a real apiserver: its defaults and its two CEL rules."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter.kube import client as kc
from karpenter.kube import errors
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane

pytestmark = pytest.mark.e2e


def _buffer(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": harness.unique("cb")},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        pytest.param({"podTemplateRef": {"name": "t"}, "replicas": 2}, None, id="replicas"),
        pytest.param({"podTemplateRef": {"name": "t"}, "limits": {"cpu": "4"}}, None, id="limits"),
        pytest.param(
            {"podTemplateRef": {"name": "t"}},
            "If podTemplateRef is set, replicas or limits must also be set",
            id="template-without-size",
        ),
        pytest.param(
            {
                "podTemplateRef": {"name": "t"},
                "scalableRef": {"kind": "Deployment", "name": "d"},
                "replicas": 1,
            },
            "You must define either PodTemplateRef or ScalableRef, but not both",
            id="both-refs",
        ),
        pytest.param(
            {"podTemplateRef": {"name": "t"}, "replicas": -1}, "replicas", id="negative-replicas"
        ),
    ],
)
@pytest.mark.asyncio
async def test_capacitybuffer_validation(
    control_plane: ControlPlane, spec: dict[str, Any], error: str | None
) -> None:
    """The apiserver accepts well-formed buffers (defaulting the active-capacity strategy) and
    rejects the shapes the API forbids, naming the rule."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        ns = await harness.namespace(kube)
        if error is None:
            made = await kube.create(kc.CAPACITYBUFFERS, _buffer(spec), ns)
            assert made["spec"]["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
        else:
            with pytest.raises(errors.ApiError) as caught:
                await kube.create(kc.CAPACITYBUFFERS, _buffer(spec), ns)
            assert error in str(caught.value)
        await kube.delete(kc.NAMESPACES, ns)
