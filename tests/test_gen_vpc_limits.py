"""hack/gen-vpc-limits.py: the Go map-literal parser and the deterministic output, offline."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from karpenter.providers.aws.core import vpclimits

SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "gen-vpc-limits.py"

GO = """
package vpc

// VPC Limits and flags for ENI and IPv4 Addresses
var Limits = map[string]*VPCLimits{
	"m5.large": {
		Interface:               3,
		IPv4PerInterface:        10,
		IsTrunkingCompatible:    true,
		BranchInterface:         9,
		DefaultNetworkCardIndex: 0,
		NetworkCards: []NetworkCard{
			{
				MaximumNetworkInterfaces: 3,
				NetworkCardIndex:         0,
			},
		},
		Hypervisor:  "nitro",
		IsBareMetal: false,
	},
	"a1.metal": {
		Interface: 8, IPv4PerInterface: 30, IsTrunkingCompatible: false,
		BranchInterface: 0, DefaultNetworkCardIndex: 0, NetworkCards: []NetworkCard{},
		Hypervisor: "", IsBareMetal: true,
	},
}
"""


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_vpc_limits", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parses_the_limits_map_literal(gen: ModuleType) -> None:
    """Keyed struct literals, nested []NetworkCard lists (empty too) and comments parse."""
    start = GO.index("var Limits = ") + len("var Limits = ")
    table = gen.Parser(gen.tokens(GO[start:])).composite()
    assert table["m5.large"]["BranchInterface"] == 9
    assert table["m5.large"]["NetworkCards"] == [
        {"MaximumNetworkInterfaces": 3, "NetworkCardIndex": 0}
    ]
    assert table["a1.metal"]["NetworkCards"] == []
    assert table["a1.metal"]["IsBareMetal"] is True


def test_rendered_file_is_deterministic_and_decodes(gen: ModuleType) -> None:
    """Rendering twice gives the same bytes, carrying the source pin and the command."""
    start = GO.index("var Limits = ") + len("var Limits = ")
    table = gen.Parser(gen.tokens(GO[start:])).composite()
    blob = gen.render(table)
    assert blob == gen.render(table)
    doc = json.loads(gzip.decompress(blob))
    assert doc["source"]["version"] == gen.VERSION
    assert doc["generatedBy"] == "python3 hack/gen-vpc-limits.py"
    decoded = vpclimits.decode(blob)
    assert decoded.types["m5.large"].branch_interfaces == 9
    assert decoded.types["a1.metal"].network_cards == ()


def test_unexpected_syntax_fails_loudly(gen: ModuleType) -> None:
    """Go it does not understand stops the script instead of being skipped."""
    with pytest.raises(SystemExit):
        gen.tokens('"m5.large": {Interface: 3 + 1}')
