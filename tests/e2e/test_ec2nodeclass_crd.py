"""EC2NodeClass CRD truth table: defaults and validation rules, judged by a real apiserver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.ec2nodeclass_cases import CASES, Case, base, merge

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "karpenter.k8s.aws", "v1", "ec2nodeclasses"


def _objects(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def _rejection(exc: ApiException) -> str:
    if exc.body is None:
        return str(exc)
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.body or exc)


async def _create(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = await _objects(api).create_cluster_custom_object(
        GROUP, VERSION, PLURAL, body
    )
    return created


@pytest.mark.asyncio
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_create(api: client.ApiClient, case: Case) -> None:
    """Each manifest is accepted (with its defaults) or refused with upstream's message."""
    body = base()
    merge(body["spec"], case.spec)
    if case.error is None:
        created = await _create(api, body)
        for key, want in case.expect.items():
            assert created["spec"][key] == want, key
        return
    with pytest.raises(ApiException) as info:
        await _create(api, body)
    assert info.value.status == 422, _rejection(info.value)
    assert case.error in _rejection(info.value)


@pytest.mark.asyncio
async def test_role_to_instance_profile_is_refused(api: client.ApiClient) -> None:
    """Switching between role and instanceProfile on update is refused, as upstream."""
    current = await _create(api, base())
    current["spec"].pop("role")
    current["spec"]["instanceProfile"] = "profile"
    with pytest.raises(ApiException) as info:
        await _objects(api).replace_cluster_custom_object(
            GROUP, VERSION, PLURAL, current["metadata"]["name"], current
        )
    assert "changing from 'instanceProfile' to 'role' is not supported" in _rejection(info.value)


@pytest.mark.asyncio
async def test_status_subresource_and_printer_columns(api: client.ApiClient) -> None:
    """Status is written through /status; Ready/Age/Role columns, short names, category."""
    created = await _create(api, base())
    created["status"] = {
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
        "securityGroups": [{"id": "sg-1", "name": "nodes"}],
        "amis": [
            {
                "id": "ami-1",
                "name": "al2023",
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                ],
            }
        ],
        "instanceProfile": "demo_123",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    updated = await _objects(api).replace_cluster_custom_object_status(
        GROUP, VERSION, PLURAL, created["metadata"]["name"], created
    )
    assert updated["status"]["instanceProfile"] == "demo_123"
    ext = client.ApiextensionsV1Api(api)
    crd = await ext.read_custom_resource_definition("ec2nodeclasses.karpenter.k8s.aws")
    assert [c.name for c in crd.spec.versions[0].additional_printer_columns] == [
        "Ready",
        "Age",
        "Role",
    ]
    assert crd.spec.names.short_names == ["ec2nc", "ec2ncs"]
    assert crd.spec.names.categories == ["karpenter"]
