"""Launch-template options against moto: IPv6 addressing and cpuOptions nested virtualization."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from karpenter.cloud.provider import InsufficientCapacityError
from karpenter.providers.aws.api.ec2nodeclass import EC2NodeClassDoc
from karpenter.providers.aws.cloud import sdkmodel
from karpenter.providers.aws.cloud.launchtemplates import Content
from karpenter.providers.aws.core import nodeclass as nc
from tests.providers.aws.cloud.fixtures import Env, claim, env, prices

__all__ = ("env", "prices")


async def template_data(e: Env) -> list[dict[str, Any]]:
    out = []
    for name in e.provider.launch_templates.cached:
        versions = await e.clients.ec2.describe_launch_template_versions(LaunchTemplateName=name)
        out.append(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"])
    return out


def content(**kw: Any) -> Content:
    return Content(
        image_id="ami-1",
        user_data="",
        instance_profile="p",
        security_group_ids=("sg-1",),
        tags={},
        block_devices=(),
        metadata=nc.MetadataOptions(),
        capacity_type="on-demand",
        **kw,
    )


@pytest.mark.asyncio
async def test_ipv6_cluster_gets_ipv6_address_and_prefixes(env: Env) -> None:
    """With an IPv6 kube-dns address the primary NIC gets an IPv6 address and IPv6 prefixes."""
    env.provider.cluster_dns = "fd12:3456:789a::a"
    cls = env.classes.items["default"]
    env.classes.put(replace(cls, spec=replace(cls.spec, ip_prefix_count=1)))
    await env.provider.create(claim("default-1", "m5.large", "c5.large"))
    (data,) = await template_data(env)
    nic = data["NetworkInterfaces"][0]
    assert nic["Ipv6PrefixCount"] == 1
    assert nic["Ipv6AddressCount"] == 1
    assert nic["PrimaryIpv6"] is True
    assert "Ipv4PrefixCount" not in nic


def test_ipv4_cluster_and_efa_only_interfaces() -> None:
    """IPv4 clusters count IPv4 prefixes; efa-only interfaces get no addressing either way."""
    v4 = content(ip_prefix_count=2).data()["NetworkInterfaces"][0]
    assert v4["Ipv4PrefixCount"] == 2 and "Ipv6AddressCount" not in v4
    nics = ((0, 0, "interface"), (1, 0, "efa-only"))
    v6 = content(ip_prefix_count=2, ipv6=True, network_interfaces=nics).data()
    primary, efa = v6["NetworkInterfaces"]
    assert (primary["Ipv6PrefixCount"], primary["PrimaryIpv6"]) == (2, True)
    assert not {"Ipv6PrefixCount", "Ipv6AddressCount", "PrimaryIpv6"} & set(efa)


def test_cpu_options_in_template_data() -> None:
    """A nestedVirtualization setting becomes CpuOptions; unset leaves CpuOptions out."""
    assert content(nested_virtualization="enabled").data()["CpuOptions"] == {
        "NestedVirtualization": "enabled"
    }
    assert "CpuOptions" not in content().data()


@pytest.mark.asyncio
async def test_nested_virtualization_limits_types(env: Env) -> None:
    """cpuOptions nestedVirtualization=enabled launches only types whose CPUs support it."""
    cls = env.classes.items["default"]
    env.classes.put(replace(cls, spec=replace(cls.spec, nested_virtualization="enabled")))
    with pytest.raises(InsufficientCapacityError):
        await env.provider.create(claim("default-1", "m5.large"))
    got = await env.provider.create(claim("default-2", "m5.large", "c8i.large"))
    assert got.labels["node.kubernetes.io/instance-type"] == "c8i.large"
    (data,) = await template_data(env)
    # sent only when the installed SDK's EC2 model has the member (botocore refuses others)
    assert ("CpuOptions" in data) == sdkmodel.nested_virtualization()


def test_cpu_options_parsed_and_hashed() -> None:
    """The manifest's cpuOptions reach the spec; setting it changes the drift hash, unset not."""
    manifest: dict[str, Any] = {
        "metadata": {"name": "default"},
        "spec": {
            "role": "R",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "subnet-1"}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}],
        },
    }
    plain = EC2NodeClassDoc.model_validate(manifest).to_core()
    manifest["spec"]["cpuOptions"] = {"nestedVirtualization": "enabled"}
    nested = EC2NodeClassDoc.model_validate(manifest).to_core()
    assert (plain.spec.nested_virtualization, nested.spec.nested_virtualization) == ("", "enabled")
    assert nc.static_hash(plain) != nc.static_hash(nested)
    # classes without cpuOptions keep the hash they had before the field existed (pinned value)
    assert nc.static_hash(plain) == "7413715521857104840"
