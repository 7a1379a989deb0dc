"""The simulate document is written exactly as ``json.dumps(doc, indent=2)`` writes it."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from karpenter.core.model.cluster import Options
from karpenter.simulate import loader, output, runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

VALUES = [
    pytest.param({}, id="empty-object"),
    pytest.param([], id="empty-list"),
    pytest.param({"a": [], "b": {}, "c": [[]], "d": [{}]}, id="nested-empty"),
    pytest.param(["x", "y\n", 'q"', "é", "\u2028", "😀"], id="strings-escaped"),
    pytest.param([1, -2, 0.5, 1e-05, 1e16, 0.1 + 0.2, True, False, None], id="scalars"),
    pytest.param({1: "int key", 2.5: "float", False: "bool", None: "none"}, id="non-string-keys"),
    pytest.param({"mixed": ["a", 1, {"b": ["c"]}, None]}, id="mixed-list"),
    pytest.param("just a string", id="bare-string"),
    pytest.param([math.inf, -math.inf], id="infinities"),
]


@pytest.mark.parametrize("value", VALUES)
def test_values_dump_as_the_standard_library_does(value: object) -> None:
    """Escapes, numbers, empty and nested collections are written byte for byte alike."""
    assert output.dumps(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_documents_dump_as_the_standard_library_does(path: Path) -> None:
    """The provisioning and disruption documents of every example are written alike."""
    scenario = loader.load([str(path)])
    for doc in (
        runner.provisioning(scenario, Options()),
        runner.disruption(scenario, Options(), 1_800_000_000.0),
    ):
        assert output.dumps(doc) == json.dumps(doc, indent=2)


def test_random_documents_dump_as_the_standard_library_does() -> None:
    """Seeded random nestings of objects, lists and scalars are written alike."""
    rng = random.Random(7)

    def value(depth: int) -> object:
        kind = rng.random() if depth < 4 else 0.0
        if kind < 0.4:
            return rng.choice(["s", "", "é", 0, 3, -1.25, True, None, "a\tb"])
        if kind < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice("abcdef"): value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(300):
        doc = value(0)
        assert output.dumps(doc) == json.dumps(doc, indent=2)
