"""`karpenter simulate` reads JSON (`kubectl get -o json`, streams) as well as YAML, alike.

End to end through the CLI: the same objects as a YAML file, a JSON ``kind: List`` and a JSON
stream give the same document, and bad input in any of them gives the one error line read here
exactly as printed (naming file, document, object and field), exit status 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter", "simulate", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )


def _objects(name: str) -> list[dict[str, Any]]:
    """The example's objects, List items unpacked."""
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all((EXAMPLES / name).read_text()):
        out.extend(doc["items"] if doc.get("kind") == "List" else [doc])
    return out


def _json_list(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=4)


@pytest.mark.parametrize("example", ["webapp-zonal-spread.yaml", "spot-ondemand-mix.yaml"])
def test_json_list_and_stream_simulate_as_the_yaml_does(example: str, tmp_path: Path) -> None:
    """A JSON List and a JSON stream of the example's objects give the YAML's document."""
    objects = _objects(example)
    (tmp_path / "list.json").write_text(_json_list(objects))
    (tmp_path / "stream.json").write_text("".join(json.dumps(o) + "\n" for o in objects))
    results = [
        _simulate(str(path), "--output", "json")
        for path in (EXAMPLES / example, tmp_path / "list.json", tmp_path / "stream.json")
    ]
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    yaml_doc, list_doc, stream_doc = (json.loads(r.stdout) for r in results)
    assert yaml_doc["nodeClaims"]
    assert list_doc == yaml_doc
    assert stream_doc == yaml_doc


def _bad_pod(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects with the third one's cpu request set to "abc"."""
    pod = objects[2]
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "abc"
    return objects


def test_bad_field_in_a_json_list_is_one_line(tmp_path: Path) -> None:
    """A bad field inside a JSON List names the item, the object and the field."""
    path = tmp_path / "pods.json"
    path.write_text(_json_list(_bad_pod(_objects("webapp-zonal-spread.yaml"))))
    result = _simulate(str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"karpenter: {path}: document 1 items[2] (Pod default/web-1): "
        "spec.containers[0].resources.requests.cpu: invalid quantity 'abc'\n"
    )


def test_bad_field_in_a_json_stream_is_one_line(tmp_path: Path) -> None:
    """In a JSON stream each object is a document, numbered from 1."""
    path = tmp_path / "pods.json"
    objects = _bad_pod(_objects("webapp-zonal-spread.yaml"))
    path.write_text("".join(json.dumps(o) for o in objects))
    result = _simulate(str(path))
    assert result.returncode == 2
    assert result.stderr == (
        f"karpenter: {path}: document 3 (Pod default/web-1): "
        "spec.containers[0].resources.requests.cpu: invalid quantity 'abc'\n"
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(
            # read by the fast YAML reader: plain kubectl-like text
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  priority: high\n",
            "document 1 (Pod p): spec.priority: expected an integer, got 'high'",
            id="fast-reader-field",
        ),
        pytest.param(
            # read by PyYAML: "yes" is a boolean in YAML 1.1
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: [yes]}\n",
            "document 1 (Pod p): metadata.labels.a: expected a string",
            id="pyyaml-field",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n spec: {}\n",
            "invalid YAML at line 5: did not find expected key",
            id="syntax",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  creationTimestamp: 2024-13-01\n",
            "invalid YAML: month must be in 1..12",
            id="date-out-of-range",
        ),
        pytest.param(
            '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},\n',
            "invalid YAML at line 2: did not find expected node content",
            id="broken-json",
        ),
    ],
)
def test_error_lines_read_as_printed(text: str, line: str, tmp_path: Path) -> None:
    """Each bad input prints exactly one line naming the file and what is wrong."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = _simulate(str(path))
    assert result.returncode == 2
    assert result.stderr == f"karpenter: {path}: {line}\n"
