"""Launch flags: the simulated cloud's catalog, and bad input exiting 2 before anything starts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from karpenter import cli
from karpenter.cloud.plugin import ProviderConfigError
from karpenter.providers.simulated.catalog import parse_catalog

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_fake_catalog() -> None:
    """fake:N gives the first N types of the fake catalog."""
    types = parse_catalog("fake:3")
    assert [t.name for t in types] == ["fake-it-0", "fake-it-1", "fake-it-2"]


def test_scenario_file_as_catalog() -> None:
    """A simulate scenario's InstanceType documents become the catalog; other kinds are skipped."""
    names = {t.name for t in parse_catalog(str(EXAMPLES / "gpu-pool.yaml"))}
    assert {"c5.xlarge", "g5.xlarge", "g5.12xlarge"} <= names


def test_catalog_preset_document(tmp_path: Path) -> None:
    """An InstanceTypeCatalog with preset fake expands to that many fake types."""
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "apiVersion: simulation.karpenter.sh/v1alpha1\n"
        "kind: InstanceTypeCatalog\nmetadata: {name: c}\nspec: {preset: fake, count: 2}\n"
    )
    assert len(parse_catalog(str(path))) == 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("fake:x", "expected fake:N", id="not-a-number"),
        pytest.param("fake:0", "from 1 to 10000", id="zero"),
        pytest.param("/nonexistent.yaml", "cannot read", id="missing-file"),
    ],
)
def test_bad_catalogs(spec: str, message: str) -> None:
    """Bad --catalog values name the problem."""
    with pytest.raises(ProviderConfigError, match=message):
        parse_catalog(spec)


def test_bad_catalog_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """``karpenter run --catalog fake:x`` exits 2 with one line on stderr."""
    assert cli.main(["run", "--catalog", "fake:x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["karpenter: --catalog: 'fake:x': expected fake:N"]


def test_bad_scheduler_config_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An invalid SCHEDULER_CONFIG stops ``karpenter run`` before it connects, naming the field."""
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        "podTopologySpread:\n  defaultConstraints:\n"
        "  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone,"
        " whenUnsatisfiable: DoNotSchedule, labelSelector: {}}\n"
    )
    monkeypatch.setenv("SCHEDULER_CONFIG", str(config))
    assert cli.main(["run", "--catalog", "fake:4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "karpenter: invalid settings: SCHEDULER_CONFIG: "
        "podTopologySpread.defaultConstraints[0].labelSelector: "
        "not allowed in default constraints (the selector is deduced per pod)"
    ]


def test_aws_without_a_region_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No AWS_REGION, no AWS_DEFAULT_REGION and no IMDS: exit 2 naming the setting, no guess."""
    with socket.socket() as s:  # a port nothing listens on stands in for an absent IMDS
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv(
            "AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{s.getsockname()[1]}"
        )
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLUSTER_NAME", "demo")
    assert cli.main(["run", "--cloud-provider", "aws"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("karpenter: invalid settings: AWS_REGION: not set")
