"""Every CLI failure, for every subcommand, is one line on stderr naming the cause, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from karpenter.kube import client as kc
from karpenter.kube import errors, preflight
from tests.e2e.conftest import ControlPlane
from tests.e2e.test_explain import karpenter

pytestmark = pytest.mark.e2e

# Each subcommand that talks to a cluster, with the arguments it needs besides --kubeconfig.
CLUSTER_COMMANDS = [
    pytest.param(("run", "--catalog", "fake:2"), "run", id="run"),
    pytest.param(("viewer",), "viewer", id="viewer"),
    pytest.param(("explain", "pod", "default/x"), "explain", id="explain-pod"),
    pytest.param(("explain", "node", "x"), "explain", id="explain-node"),
]
_QUIET = {"METRICS_PORT": "0", "HEALTH_PROBE_PORT": "0", "DISABLE_LEADER_ELECTION": "true"}


def _one_line(args: tuple[str, ...], env: dict[str, str] | None = None) -> str:
    done = karpenter(*args, env={**_QUIET, **(env or {})})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    return lines[0]


@pytest.fixture(scope="module")
def dead_kubeconfig(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's kubeconfig pointing at a port nothing listens on."""
    doc = yaml.safe_load(control_plane.kubeconfig.read_text())
    for cluster in doc["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"
    path = tmp_path_factory.mktemp("dead") / "dead.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("args", "name"), CLUSTER_COMMANDS)
def test_missing_kubeconfig(args: tuple[str, ...], name: str) -> None:
    """``--kubeconfig /missing`` names the file."""
    line = _one_line((*args, "--kubeconfig", "/missing"))
    assert line == f"karpenter: {name}: kubeconfig /missing: no such file"


@pytest.mark.parametrize(("args", "name"), CLUSTER_COMMANDS)
def test_not_a_kubeconfig(args: tuple[str, ...], name: str, tmp_path: Path) -> None:
    """A file that is not a kubeconfig says so."""
    bad = tmp_path / "bad"
    bad.write_text("hello: world\n")
    line = _one_line((*args, "--kubeconfig", str(bad)))
    assert (
        line == f"karpenter: {name}: kubeconfig {bad}: not a kubeconfig (no clusters or contexts)"
    )


@pytest.mark.parametrize(("args", "name"), CLUSTER_COMMANDS)
def test_no_kubeconfig_outside_a_cluster(args: tuple[str, ...], name: str) -> None:
    """No flag, no $KUBECONFIG and no service account: the line says what to pass."""
    env = {"KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": ""}
    line = _one_line(args, env)
    assert line.startswith(f"karpenter: {name}: no kubeconfig: pass --kubeconfig or set KUBECONFIG")


@pytest.mark.parametrize(("args", "name"), CLUSTER_COMMANDS)
def test_unreachable_apiserver(args: tuple[str, ...], name: str, dead_kubeconfig: Path) -> None:
    """A kubeconfig whose apiserver is down names the address."""
    line = _one_line((*args, "--kubeconfig", str(dead_kubeconfig)))
    assert line.startswith(f"karpenter: {name}: cannot reach the apiserver at https://127.0.0.1:1")


@pytest.mark.parametrize(
    ("args", "name"),
    [
        *CLUSTER_COMMANDS,
        pytest.param(("sandbox",), "sandbox", id="sandbox"),
        pytest.param(("simulate", "examples/webapp-zonal-spread.yaml"), "simulate", id="simulate"),
    ],
)
def test_bad_settings(args: tuple[str, ...], name: str) -> None:
    """An invalid environment setting is named before anything starts."""
    line = _one_line(args, {"BATCH_IDLE_DURATION": "soon"})
    assert line.startswith("karpenter: ")
    assert "invalid settings: BATCH_IDLE_DURATION" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ("run", "--catalog", "fake:x", "--kubeconfig", "/missing"),
            "--catalog: 'fake:x': expected fake:N",
            id="run-catalog",
        ),
        pytest.param(
            ("sandbox", "--catalog", "fake:0"), "N must be from 1 to 10000", id="sandbox-catalog"
        ),
        pytest.param(
            ("viewer", "--catalog", "/nope.yaml", "--kubeconfig", "/missing"),
            "--catalog: cannot read /nope.yaml",
            id="viewer-catalog",
        ),
        pytest.param(
            ("viewer", "--selector", "a in (b)", "--kubeconfig", "/missing"),
            "--selector: cannot parse",
            id="viewer-selector",
        ),
        pytest.param(
            ("explain", "pod", "x", "--cloud-provider", "aws", "--kubeconfig", "/missing"),
            "invalid settings: CLUSTER_NAME: required with --cloud-provider aws",
            id="explain-aws-settings",
        ),
        pytest.param(("simulate", "/nope.yaml"), "/nope.yaml", id="simulate-file"),
    ],
)
def test_bad_flags(args: tuple[str, ...], expected: str) -> None:
    """Bad flags are one line naming the flag or file, before any cluster is contacted."""
    assert expected in _one_line(args, {"CLUSTER_NAME": ""})


@pytest.mark.asyncio
async def test_preflight_names_a_missing_api(control_plane: ControlPlane) -> None:
    """A cluster that does not serve a needed resource (group or plural) is MissingAPI, naming it
    and the CRDs to install; the real ones pass."""
    async with kc.connect(control_plane.kubeconfig) as kube:
        await preflight.check(kube)
        for missing in (
            kc.Resource("karpenter.sh", "v1", "nodewidgets", "NodeWidget"),
            kc.Resource("widgets.example.com", "v1", "widgets", "Widget"),
        ):
            with pytest.raises(errors.MissingAPI, match=f"does not serve {missing.plural}"):
                await preflight.check(kube, (missing,))
