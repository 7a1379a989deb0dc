"""Labels, prices and the catalogue built from real EC2 descriptions."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from karpenter.providers.aws.core import amifamily, catalog, ec2types, pricing
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core.discovered import DiscoveredCapacity, amis_key
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.unavailable import UnavailableOfferings


def test_labels_of_m5_large(ec2: dict[str, InstanceTypeInfo]) -> None:
    """m5.large carries upstream's instance labels with EC2's values."""
    got = awslbl.instance_labels(ec2["m5.large"])
    assert got[awslbl.CATEGORY] == "m"
    assert got[awslbl.GENERATION] == "5"
    assert got[awslbl.FAMILY] == "m5"
    assert got[awslbl.SIZE] == "large"
    assert got[awslbl.CPU] == "2"
    assert got[awslbl.CPU_MANUFACTURER] == "intel"
    assert got[awslbl.CPU_CLOCK] == "3100"
    assert got[awslbl.MEMORY] == "8192"
    assert got[awslbl.EBS_BANDWIDTH] == "4750"
    assert got[awslbl.NETWORK_BANDWIDTH] == "750"
    assert got[awslbl.HYPERVISOR] == "nitro"
    assert got[awslbl.FLEX] == "false"
    assert awslbl.GPU_COUNT not in got


def test_gpu_accelerator_and_nvme_labels(ec2: dict[str, InstanceTypeInfo]) -> None:
    """GPU, Neuron accelerator and local NVMe labels, names in lower kebab case."""
    g4 = awslbl.instance_labels(ec2["g4dn.xlarge"])
    assert (g4[awslbl.GPU_NAME], g4[awslbl.GPU_MANUFACTURER]) == ("t4", "nvidia")
    assert (g4[awslbl.GPU_COUNT], g4[awslbl.GPU_MEMORY]) == ("1", "16384")
    assert g4[awslbl.LOCAL_NVME] == "125"
    inf2 = awslbl.instance_labels(ec2["inf2.xlarge"])
    assert inf2[awslbl.ACCELERATOR_NAME] == "inferentia2"
    assert inf2[awslbl.ACCELERATOR_MANUFACTURER] == "aws"
    flex = awslbl.instance_labels(ec2["c7i-flex.large"])
    assert (flex[awslbl.FLEX], flex[awslbl.CATEGORY], flex[awslbl.GENERATION]) == ("true", "c", "7")


def _input(**prices: float) -> catalog.CatalogInput:
    return catalog.CatalogInput(
        region="us-east-1",
        zones={"m5.large": ("us-east-1a", "us-east-1b"), "a1.large": ("us-east-1a",)},
        prices=pricing.PriceTable("us-east-1", prices, {}, prices),
        zone_ids={"us-east-1a": "use1-az2", "us-east-1b": "use1-az4"},
    )


def test_offerings_prices_and_ice(ec2: dict[str, InstanceTypeInfo]) -> None:
    """One offering per zone × capacity type; an ICE hides only its own offering, for 3m."""
    ice = UnavailableOfferings()
    ice.mark("spot", "m5.large", "us-east-1a", now=100.0)
    it = catalog.instance_type(ec2["m5.large"], _input(**{"m5.large": 0.096}), ice, now=150.0)
    assert it is not None
    got = {(o.zone, o.capacity_type): o.available for o in it.offerings}
    assert got == {
        ("us-east-1a", "on-demand"): True,
        ("us-east-1a", "spot"): False,
        ("us-east-1b", "on-demand"): True,
        ("us-east-1b", "spot"): True,
    }
    later = catalog.instance_type(ec2["m5.large"], _input(**{"m5.large": 0.096}), ice, now=281.0)
    assert later is not None and all(o.available for o in later.offerings)
    assert it.requirements["topology.k8s.aws/zone-id"].values == {"use1-az2", "use1-az4"}


def test_unpriced_and_incompatible_offerings_unavailable(ec2: dict[str, InstanceTypeInfo]) -> None:
    """No price means no available offering; a1 types are unavailable with AL2023."""
    it = catalog.instance_type(ec2["m5.large"], _input())
    assert it is not None and not any(o.available for o in it.offerings)
    a1 = catalog.instance_type(ec2["a1.large"], _input(**{"a1.large": 0.051}))
    assert a1 is not None and not any(o.available for o in a1.offerings)


def test_absent_labels_are_does_not_exist(ec2: dict[str, InstanceTypeInfo]) -> None:
    """A CPU-only type says DoesNotExist for GPU keys, so ``Exists`` selectors skip it."""
    it = catalog.instance_type(ec2["m5.large"], _input(**{"m5.large": 0.096}))
    assert it is not None
    assert it.requirements[awslbl.GPU_COUNT].is_empty()
    assert it.requirements["kubernetes.io/arch"].values == {"amd64"}


def test_price_file_region_fallback_and_spot() -> None:
    """A region missing from the file falls back to us-east-1; spot seeds from on-demand."""
    data = {
        "onDemand": {"us-east-1": {"m5.large": 0.096}},
        "spot": {"us-east-1": {"m5.large": {"us-east-1a": 0.04}}},
    }
    table = pricing.from_file(data, "eu-west-1")
    assert table.on_demand_price("m5.large") == 0.096
    assert table.spot_price("m5.large", "us-east-1a") == 0.04
    assert table.spot_price("m5.large", "us-east-1b") is None
    flat = pricing.from_file({"onDemand": {"us-east-1": {"c5.large": 0.085}}}, "us-east-1")
    assert flat.spot_price("c5.large", "any-zone") == 0.085


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param([], "expected an object", id="not-object"),
        pytest.param({"onDemand": {"eu-west-1": {}}}, "no prices for", id="no-region"),
        pytest.param({"onDemand": {"us-east-1": {"m5.large": "x"}}}, "m5.large", id="bad-price"),
    ],
)
def test_price_file_errors(data: object, error: str) -> None:
    """Malformed price files name the field at fault."""
    with pytest.raises(pricing.PriceFileError, match=error):
        pricing.from_file(data, "us-east-1")


def test_estimate_labelled(ec2: dict[str, InstanceTypeInfo]) -> None:
    """Types without a price get an estimate in the right range, marked as estimated."""
    table = pricing.fill_estimates(pricing.PriceTable("us-east-1"), (ec2["m5.large"],))
    assert table.estimated() == ("m5.large",)
    assert 0.07 < (table.on_demand_price("m5.large") or 0) < 0.12


def test_price_list_item_and_api_region() -> None:
    """A GetProducts entry yields its instance type and non-zero USD price."""
    item = {
        "product": {"attributes": {"instanceType": "m5.large"}},
        "terms": {
            "OnDemand": {
                "X.Y": {"priceDimensions": {"X.Y.Z": {"pricePerUnit": {"USD": "0.0960000000"}}}}
            }
        },
    }
    assert pricing.parse_price_list_item(json.dumps(item)) == ("m5.large", 0.096)
    assert pricing.parse_price_list_item("{not json") is None
    assert pricing.pricing_api_region("eu-west-3") == "eu-central-1"
    assert pricing.pricing_api_region("ap-northeast-1") == "ap-south-1"
    assert pricing.pricing_api_region("us-west-2") == "us-east-1"


def test_alias_parameters() -> None:
    """Aliases map to upstream's SSM public parameter paths per arch and variant."""
    al2023 = amifamily.alias_parameters(amifamily.parse_alias("al2023@latest"), "1.31")
    assert al2023[0].path == (
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"
    )
    assert [p.variant for p in al2023] == ["standard", "nvidia", "neuron", "standard", "nvidia"]
    br = amifamily.alias_parameters(amifamily.parse_alias("bottlerocket@v1.20.0"), "1.31")
    assert br[0].path == "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.0/image_id"
    with pytest.raises(amifamily.AliasError):
        amifamily.parse_alias("windows2022@v1")
    with pytest.raises(amifamily.AliasError):
        amifamily.parse_alias("ubuntu@latest")


def test_discovered_memory_replaces_estimate(ec2: dict[str, InstanceTypeInfo]) -> None:
    """Observed Node memory (smallest seen, 60 days) replaces the VM-overhead estimate."""
    seen = DiscoveredCapacity()
    key = amis_key(["ami-2", "ami-1"])
    assert key == amis_key(["ami-1", "ami-2"])
    seen.observe("m5.large", key, 7_800 * 2**20 * 1000, now=0.0)
    seen.observe("m5.large", key, 7_700 * 2**20 * 1000, now=10.0)
    assert seen.memory("m5.large", key, now=20.0) == 7_700 * 2**20 * 1000
    assert seen.memory("m5.large", key, now=10.0 + 60 * 86400) is None
    inp = _input(**{"m5.large": 0.096})
    inp = catalog.CatalogInput(
        inp.region, inp.zones, inp.prices, inp.zone_ids, discovered_memory=seen.for_amis(key, 20.0)
    )
    it = catalog.instance_type(ec2["m5.large"], inp)
    assert it is not None and it.capacity["memory"] == 7_700 * 2**20 * 1000


def test_network_interfaces_must_fit(ec2: dict[str, InstanceTypeInfo]) -> None:
    """A second network card or an efa-only interface rules out types that lack them."""
    efa = ((0, 0, "interface"), (1, 0, "efa-only"))
    assert not catalog.compatible(ec2["m5.large"], "AL2023", efa)
    assert catalog.compatible(ec2["p4d.24xlarge"], "AL2023", efa)
    assert catalog.compatible(ec2["m5.large"], "AL2023", ((0, 0, "interface"),))


def test_nested_virtualization_needs_the_processor_feature(
    ec2: dict[str, InstanceTypeInfo],
) -> None:
    """cpuOptions nestedVirtualization=enabled leaves only types advertising the feature."""
    inp = catalog.CatalogInput(
        region="us-east-1",
        zones={"m5.large": ("us-east-1a",), "c8i.large": ("us-east-1a",)},
        prices=pricing.PriceTable("us-east-1", {"m5.large": 0.096, "c8i.large": 0.09}, {}, {}),
        nested_virtualization=True,
    )
    m5 = catalog.instance_type(ec2["m5.large"], inp)
    c8i = catalog.instance_type(ec2["c8i.large"], inp)
    assert m5 is not None and not any(o.available for o in m5.offerings)
    assert c8i is not None and any(o.available for o in c8i.offerings)
    plain = catalog.instance_type(ec2["m5.large"], replace(inp, nested_virtualization=False))
    assert plain is not None and any(o.available for o in plain.offerings)


def test_arch_skips_architectures_kubernetes_does_not_name(
    ec2: dict[str, InstanceTypeInfo],
) -> None:
    """t2.medium lists i386 first; like upstream its arch is amd64 (and it can run Windows)."""
    info = ec2["t2.medium"]
    assert info.architectures[0] == "i386"
    assert ec2types.arch_label(info) == "amd64"
    inp = replace(_input(**{"t2.medium": 0.05}), zones={"t2.medium": ("us-east-1a",)})
    win = replace(inp, capacity=replace(inp.capacity, ami_family=amifamily.WINDOWS2022))
    (linux,) = catalog.build([info], inp)
    (windows,) = catalog.build([info], win)
    assert linux.requirements["kubernetes.io/arch"].values == {"amd64"}
    assert windows.requirements["kubernetes.io/os"].values == {"windows"}
