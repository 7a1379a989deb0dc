"""The static VPC limits table: decoding, and ``pod-eni`` / Windows ``PrivateIPv4Address``
capacity from it, checked against rows of the VPC resource controller's ``limits.go``."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from karpenter.core.model.quantity import MILLI
from karpenter.providers.aws.core import amifamily, capacity, catalog, pricing, vpclimits
from karpenter.providers.aws.core.capacity import CapacityOptions
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.core.vpclimits import VpcLimits

ROOT = Path(__file__).resolve().parents[4]
WINDOWS = amifamily.WINDOWS2022


def _blob(doc: object) -> bytes:
    return gzip.compress(json.dumps(doc).encode())


def test_packaged_table_is_the_pinned_version(vpc: Mapping[str, VpcLimits]) -> None:
    """The committed file decodes to well over 500 types, from the version the script pins."""
    assert len(vpc) > 500
    script = (ROOT / "hack" / "gen-vpc-limits.py").read_text(encoding="utf-8")
    pinned = re.search(r'^VERSION = "([^"]+)"', script, re.MULTILINE)
    data = ROOT / "karpenter" / "providers" / "aws" / "core"
    blob = data.joinpath(*vpclimits.DATA_PATH).read_bytes()
    assert pinned is not None
    assert vpclimits.decode(blob).version == pinned.group(1)


@pytest.mark.parametrize(
    ("name", "trunking", "branches", "ipv4", "interfaces"),
    [
        # rows as limits.go states them
        pytest.param("m5.large", True, 9, 10, 3, id="m5.large"),
        pytest.param("c5.xlarge", True, 18, 15, 4, id="c5.xlarge"),
        pytest.param("t2.medium", False, 0, 6, 3, id="t2.medium-xen"),
        pytest.param("p4d.24xlarge", True, 62, 50, 60, id="p4d.24xlarge-4-cards"),
    ],
)
def test_known_rows(
    vpc: Mapping[str, VpcLimits],
    name: str,
    trunking: bool,
    branches: int,
    ipv4: int,
    interfaces: int,
) -> None:
    """Known types carry limits.go's trunking flag, branch interfaces, IPs and ENIs."""
    row = vpc[name]
    assert (row.trunking_compatible, row.branch_interfaces) == (trunking, branches)
    assert (row.ipv4_per_interface, row.interfaces) == (ipv4, interfaces)


def test_network_cards_by_index(vpc: Mapping[str, VpcLimits]) -> None:
    """Per-card interface limits are kept in card-index order with the default card."""
    assert vpc["p4d.24xlarge"].network_cards == (15, 15, 15, 15)
    assert vpc["p4d.24xlarge"].default_network_card == 0
    assert vpc["m5.large"].network_cards == (3,)
    assert vpc["m5.large"].hypervisor == "nitro"


@pytest.mark.parametrize(
    ("name", "pod_eni", "ips"),
    [
        pytest.param("m5.large", 9, 9, id="trunking"),
        pytest.param("t2.medium", 0, 5, id="not-trunking"),
        pytest.param("x9.unknown", 0, 0, id="not-in-table"),
    ],
)
def test_lookups(vpc: Mapping[str, VpcLimits], name: str, pod_eni: int, ips: int) -> None:
    """pod-eni only for trunking types; IPs are IPv4 per interface − 1; unknown types get 0."""
    assert vpclimits.pod_enis(vpc, name) == pod_eni
    assert vpclimits.private_ipv4(vpc, name) == ips


def test_trunking_types_get_pod_eni_capacity(
    ec2: dict[str, InstanceTypeInfo], vpc: Mapping[str, VpcLimits]
) -> None:
    """m5.large advertises 9 pod-eni on Linux, and reserved ENIs do not reduce it."""
    cap = capacity.capacity(ec2["m5.large"], CapacityOptions(vpc_limits=vpc))
    assert cap[capacity.POD_ENI] == 9 * MILLI
    assert capacity.PRIVATE_IPV4 not in cap
    reserved = CapacityOptions(vpc_limits=vpc, reserved_enis=1)
    assert capacity.capacity(ec2["m5.large"], reserved)[capacity.POD_ENI] == 9 * MILLI
    assert capacity.POD_ENI not in capacity.overhead(ec2["m5.large"], reserved)


@pytest.mark.parametrize("name", ["t2.medium", "t3.large"])
def test_non_trunking_types_get_no_pod_eni(
    ec2: dict[str, InstanceTypeInfo], vpc: Mapping[str, VpcLimits], name: str
) -> None:
    """Types the VPC resource controller cannot trunk have no pod-eni resource."""
    assert not vpc[name].trunking_compatible
    assert capacity.POD_ENI not in capacity.capacity(ec2[name], CapacityOptions(vpc_limits=vpc))


def test_without_table_no_vpc_resources(ec2: dict[str, InstanceTypeInfo]) -> None:
    """An empty table yields neither resource, Windows included."""
    cap = capacity.capacity(ec2["m5.large"], CapacityOptions(ami_family=WINDOWS))
    assert capacity.POD_ENI not in cap
    assert capacity.PRIVATE_IPV4 not in cap


@pytest.mark.parametrize(
    ("name", "ips"),
    [
        pytest.param("m5.large", 9, id="m5.large"),
        pytest.param("c5.xlarge", 14, id="c5.xlarge"),
        pytest.param("t3.large", 11, id="t3.large-not-trunking"),
        pytest.param("t2.medium", 5, id="t2.medium-i386-listed-first"),
        pytest.param("m6g.large", None, id="arm64-cannot-run-windows"),
    ],
)
def test_windows_private_ipv4_from_table(
    ec2: dict[str, InstanceTypeInfo], vpc: Mapping[str, VpcLimits], name: str, ips: int | None
) -> None:
    """Windows amd64 types advertise the table's IPv4 per interface − 1; arm64 ones nothing."""
    cap = capacity.capacity(ec2[name], CapacityOptions(ami_family=WINDOWS, vpc_limits=vpc))
    got = cap.get(capacity.PRIVATE_IPV4)
    assert got == (ips * MILLI if ips is not None else None)


def test_catalog_instance_type_has_pod_eni(
    ec2: dict[str, InstanceTypeInfo], vpc: Mapping[str, VpcLimits]
) -> None:
    """The built catalogue carries pod-eni in capacity, untouched by overhead."""
    inp = catalog.CatalogInput(
        region="us-east-1",
        zones={"m5.large": ("us-east-1a",), "t3.large": ("us-east-1a",)},
        prices=pricing.PriceTable("us-east-1", {"m5.large": 0.1, "t3.large": 0.08}, {}, {}),
        capacity=CapacityOptions(vpc_limits=vpc),
    )
    types = {t.name: t for t in catalog.build([ec2["m5.large"], ec2["t3.large"]], inp)}
    assert types["m5.large"].capacity[capacity.POD_ENI] == 9 * MILLI
    assert capacity.POD_ENI not in types["m5.large"].overhead
    assert capacity.POD_ENI not in types["t3.large"].capacity


@pytest.mark.parametrize(
    "blob",
    [
        pytest.param(b"not gzip", id="not-gzip"),
        pytest.param(_blob({"source": {}}), id="no-types"),
        pytest.param(_blob({"types": {"m5.large": {"Interface": "3"}}}), id="bad-field"),
        pytest.param(_blob(["m5.large"]), id="not-an-object"),
    ],
)
def test_decode_rejects_other_formats(blob: bytes) -> None:
    """Bytes that are not the generated format raise VpcLimitsError, not a bare KeyError."""
    with pytest.raises(vpclimits.VpcLimitsError):
        vpclimits.decode(blob)


def test_decode_minimal_row() -> None:
    """A row in limits.go's field names decodes, cards ordered by their index."""
    row = {
        "Interface": 4,
        "IPv4PerInterface": 15,
        "IsTrunkingCompatible": True,
        "BranchInterface": 12,
        "DefaultNetworkCardIndex": 0,
        "NetworkCards": [
            {"MaximumNetworkInterfaces": 2, "NetworkCardIndex": 1},
            {"MaximumNetworkInterfaces": 4, "NetworkCardIndex": 0},
        ],
        "Hypervisor": "",
        "IsBareMetal": True,
    }
    table = vpclimits.decode(_blob({"source": {"version": "v0"}, "types": {"z.metal": row}}))
    assert table.version == "v0"
    assert table.types["z.metal"] == VpcLimits(4, 15, True, 12, 0, (4, 2), "", True)
