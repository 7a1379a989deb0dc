"""Scenario text is read as PyYAML reads it (YAML) or as JSON, whichever reader does the work.

yaml-rs reads YAML only where a scan of the text proves it reads as PyYAML does; these tests
compare the readings: a table of the known YAML 1.1 / 1.2 differences and of syntax yaml-rs
accepts and PyYAML refuses, the examples, and seeded random documents. The safety property
checked on every text: whenever yaml-rs alone would read it differently from PyYAML (or accept
what PyYAML refuses), the scan refuses it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter.simulate import documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_PYYAML: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _pyyaml(text: str) -> str:
    """PyYAML's reading, as a repr (1, 1.0 and True differ; NaN equals NaN), or its error."""
    try:
        return repr(list(yaml.load_all(text, Loader=_PYYAML)))
    except (yaml.YAMLError, ValueError) as err:  # ValueError: a timestamp out of range
        return f"error: {err}"


def _read(text: str) -> str:
    try:
        return repr(documents.read(text))
    except (yaml.YAMLError, ValueError) as err:
        return f"error: {err}"


def _unguarded(text: str) -> str | None:
    """yaml-rs's own reading (per document), or None where it fails."""
    docs = documents.fast_yaml(text)
    return None if docs is None else repr(docs)


def _check(text: str) -> bool:
    """Both properties for one text; True when yaml-rs read it."""
    assert _read(text) == _pyyaml(text), text
    fast = _unguarded(text)
    if fast is not None and fast != _pyyaml(text):
        assert documents.hazard(text), f"scan let through a different reading: {text!r}"
    return fast is not None and not documents.hazard(text)


SCALARS = [
    *("yes", "No", "ON", "off", "y", "n", "true", "False", "null", "~", "Null", ""),
    *("010", "0o10", "0x1F", "0b101", "1_000", "1:20", "190:20:30.15", "+1", "-0", "-0.0"),
    *("1.5", "1.", ".5", "1e3", "1.5e+3", "1.5E-3", ".inf", "-.inf", ".NaN", "007.5"),
    *("2024-01-01", "2024-01-01T00:00:00Z", "2001-12-14 21:59:43.10 -5", "2024-1-1"),
    *("12345678901234567890", "123456789012345678", "0", "42", "-17", "3.25"),
    *("100m", "512Mi", "1.5Gi", "10.0.0.1", "v1.2.3", "a:b", "http://x/y?z=1&w=2", "-a"),
    *("=", "<<", "a b", "on fire", "fd00::1", "1-2", "0.0.1", "1,2", "'010'", '"yes"'),
]


@pytest.mark.parametrize("scalar", SCALARS)
def test_scalars_read_as_pyyaml_reads_them(scalar: str) -> None:
    """Every plain or quoted scalar, as a value, key or list item, reads as PyYAML reads it."""
    for text in (f"x: {scalar}\n", f"{scalar}: x\n", f"- {scalar}\n", f"x: [{scalar}, a]\n"):
        _check(text)


SYNTAX = [
    pytest.param("a: &x 1\nb: *x\n", id="anchor-alias"),
    pytest.param("base: &b {a: 1}\nc:\n  <<: *b\n  d: 2\n", id="merge"),
    pytest.param("x: !!str 1\ny: !!int '2'\n", id="tags"),
    pytest.param("? [a, b]\n: c\n", id="complex-key"),
    pytest.param("[a]: b\n", id="flow-key"),
    pytest.param("{a: 1}: b\n", id="flow-map-key"),
    pytest.param("a: 1\na: 2\nb: 3\n", id="duplicate-keys"),
    pytest.param("a: 1\n---\nb: 2\n", id="two-documents"),
    pytest.param("---\n- a\n- b\n", id="one-list-document"),
    pytest.param("- a\n- b\n", id="implicit-list-document"),
    pytest.param("---\n---\na: 1\n---\n", id="empty-documents"),
    pytest.param("# header\n---\na: 1\n", id="comment-before-first-marker"),
    pytest.param("null\n---\na: 1\n", id="null-first-document"),
    pytest.param("a: 1\n...\n---\nb: 2\n", id="document-end"),
    pytest.param("%YAML 1.1\n---\na: 1\n", id="directive"),
    pytest.param("x: |\n  a\n  b\ny: >-\n  c\n  d\n", id="block-scalars"),
    pytest.param('x: "a\\tb\\u00e9\\x41"\n', id="escapes"),
    pytest.param("x: 'it''s'\n", id="single-quote-escape"),
    pytest.param('x: "a\n  b"\n', id="multi-line-quoted"),
    pytest.param("x: a\n  b\n", id="multi-line-plain"),
    pytest.param("x:\n\t- a\n", id="tab-indent"),
    pytest.param("x: 1\r\ny: 2\r\n", id="crlf"),
    pytest.param("\ufeffx: 1\n", id="bom"),
    pytest.param("x: a\x07b\n", id="non-printable"),
    pytest.param("x: a\u2028b\n", id="unicode-line-separator"),
    pytest.param("x: [1,\n", id="unclosed-flow"),
    pytest.param("a: b: c\n", id="nested-colon"),
    pytest.param("x: @a\n", id="reserved-indicator"),
    pytest.param("- a\n-b\n", id="bad-sequence"),
    pytest.param("a: 1\n b: 2\n", id="bad-indent"),
    pytest.param("--- |\n  text\n", id="scalar-document"),
    pytest.param("--- {a: 1}\n", id="flow-on-marker-line"),
    pytest.param('{"a":1, "b": [true, null]}\n', id="json-like-flow"),
    pytest.param("x: {a: 1, b: [2, 3]}\n", id="nested-flow"),
    pytest.param("", id="empty"),
    pytest.param("# only a comment\n", id="only-comments"),
]


@pytest.mark.parametrize("text", SYNTAX)
def test_syntax_reads_as_pyyaml_reads_it(text: str) -> None:
    """Anchors, tags, keys, markers, escapes and malformed text read (or fail) as in PyYAML."""
    _check(text)


def test_the_examples_read_as_pyyaml_reads_them() -> None:
    """Every example scenario reads alike; the kubectl-like ones through yaml-rs."""
    fast = [_check(path.read_text()) for path in sorted(EXAMPLES.glob("*.yaml"))]
    assert fast and any(fast)


_KEYS = ["name", "on", "yes", "1", "010", "a b", "app.kubernetes.io/name", '"q"', "'s'", "x-1"]


def _scalar(rng: random.Random) -> str:
    value = rng.choice(SCALARS)
    style = rng.random()
    if style < 0.15 and "'" not in value:
        return f"'{value}'"
    if style < 0.3 and '"' not in value:
        return f'"{value}"'
    return value


def _node(rng: random.Random, indent: int, depth: int) -> str:
    """A block mapping at ``indent`` (values: scalars, flow or block collections)."""
    pad = " " * indent
    lines = []
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(_KEYS)
        kind = rng.random() if depth < 3 else 0.0
        if kind < 0.55:
            lines.append(f"{pad}{key}: {_scalar(rng)}")
        elif kind < 0.7:
            items = ", ".join(_scalar(rng) for _ in range(rng.randint(0, 3)))
            lines.append(f"{pad}{key}: [{items}]")
        elif kind < 0.85:
            lines.append(f"{pad}{key}:\n{_node(rng, indent + 2, depth + 1)}")
        else:
            items = "\n".join(f"{pad}- {_scalar(rng)}" for _ in range(rng.randint(1, 3)))
            lines.append(f"{pad}{key}:\n{items}")
    return "\n".join(lines)


def _text(rng: random.Random) -> str:
    docs = [_node(rng, 0, 0) for _ in range(rng.randint(1, 3))]
    text = "\n---\n".join(docs) + "\n"
    if rng.random() < 0.2:  # sometimes broken: a character dropped
        cut = rng.randrange(len(text))
        text = text[:cut] + text[cut + 1 :]
    return text


def test_random_documents_read_as_pyyaml_reads_them() -> None:
    """Seeded random documents of the tricky scalars read alike, many through yaml-rs."""
    rng = random.Random(19)
    fast = sum(_check(_text(rng)) for _ in range(600))
    assert fast > 30  # guard: the fast reader did real work


KUBECTL_LIST = {
    "apiVersion": "v1",
    "kind": "List",
    "metadata": {"resourceVersion": ""},
    "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"priority": 1}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "labels": {"on": "yes"}}},
    ],
}


def test_json_list_reads_as_json() -> None:
    """``kubectl get -o json`` output is one document, read by the JSON reader."""
    text = json.dumps(KUBECTL_LIST, indent=4)
    assert documents.read(text) == [KUBECTL_LIST]


def test_json_stream_is_one_document_per_value() -> None:
    """Concatenated JSON objects are a stream of documents, in order."""
    items = KUBECTL_LIST["items"]
    text = "".join(json.dumps(item, indent=2) + "\n" for item in items)
    assert documents.read(text) == items


def test_json_numbers_are_json_numbers() -> None:
    """In JSON, 1e3 is a number (PyYAML would read a string); JSON is read as JSON."""
    assert documents.read('{"x": 1e3, "y": "010"}') == [{"x": 1000.0, "y": "010"}]


def test_text_that_is_not_json_is_yaml() -> None:
    """A flow mapping that is not JSON reads as YAML; broken JSON fails as PyYAML says."""
    assert documents.read("{a: 1}\n") == [{"a": 1}]
    with pytest.raises(yaml.YAMLError) as info:
        documents.read('{"a": [1,\n')
    assert _pyyaml('{"a": [1,\n') == f"error: {info.value}"
