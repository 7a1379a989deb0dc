"""``karpenter explain`` as a process against the session's apiserver: the printed answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from karpenter.kube import client as kc
from tests.e2e import harness
from tests.e2e.conftest import ControlPlane
from tests.e2e.scene import Scene, scene

pytestmark = pytest.mark.e2e
__all__ = ("scene",)  # the fixture, used by name

_REPO = Path(__file__).resolve().parents[2]


def karpenter(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a person would, capturing what it prints."""
    full = {**os.environ, "PYTHONPATH": str(_REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "karpenter", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        check=False,
    )


def _explain(cp: ControlPlane, *args: str) -> dict[str, Any]:
    done = karpenter("explain", *args, "--kubeconfig", str(cp.kubeconfig), "--output", "json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_explain_pods(control_plane: ControlPlane, scene: Scene) -> None:
    """A pod no type holds gets the simulate reason; one that needs a node gets the NodePool
    and the launch; a bound pod says where it is."""
    huge = _explain(control_plane, "pod", f"{scene.ns}/huge")
    assert huge["outcome"] == "unschedulable"
    assert "no instance type has 200 cpu" in huge["reason"]
    wide = _explain(control_plane, "pod", f"{scene.ns}/wide")
    assert (wide["outcome"], wide["target"]) == ("new-nodeclaim", scene.pool)
    assert wide["nodeClaim"]["nodePool"] == scene.pool
    assert wide["nodeClaim"]["launch"]["instanceType"].startswith("fake-it-")
    bound = _explain(control_plane, "pod", f"{scene.ns}/web-1")
    assert (bound["outcome"], bound["target"], bound["provisionable"]) == (
        "bound",
        scene.node,
        False,
    )
    table = karpenter(
        "explain", "pod", f"{scene.ns}/huge", "--kubeconfig", str(control_plane.kubeconfig),
        "--output", "table",
    )  # fmt: skip
    assert table.returncode == 0
    assert f"pod {scene.ns}/huge" in table.stdout
    assert "outcome:       unschedulable" in table.stdout


def test_explain_node_names_every_reason(control_plane: ControlPlane, scene: Scene) -> None:
    """The node is no candidate: a do-not-disrupt pod and consolidation turned off, both named."""
    doc = _explain(control_plane, "node", scene.node)
    assert (doc["nodePool"], doc["candidate"], doc["command"]) == (scene.pool, False, None)
    assert {r["kind"] for r in doc["reasons"]} == {"DoNotDisrupt", "ConsolidationDisabled"}
    dnd = next(r for r in doc["reasons"] if r["kind"] == "DoNotDisrupt")
    assert dnd["message"] == f"pod {scene.ns}/web-2 has karpenter.sh/do-not-disrupt"
    launching = _explain(control_plane, "node", scene.launching)
    assert [r["kind"] for r in launching["reasons"]] == ["NotInitialized", "ConsolidationDisabled"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            ("pod", "default/nope"),
            "karpenter: explain: pod default/nope not found",
            id="no-such-pod",
        ),
        pytest.param(
            ("node", "nope"),
            "karpenter: explain: node nope not found (no Node or NodeClaim of that name)",
            id="no-such-node",
        ),
    ],
)
def test_explain_not_found(control_plane: ControlPlane, args: tuple[str, ...], line: str) -> None:
    """A name the cluster lacks is one line on stderr, exit 2."""
    done = karpenter("explain", *args, "--kubeconfig", str(control_plane.kubeconfig))
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [line], "")


def test_explain_counts_capacity_buffer_headroom(control_plane: ControlPlane, scene: Scene) -> None:
    """With the CapacityBuffer gate on, a buffer's virtual pods are resolved (read-only: no
    status written) and solved with the pending pods, so the claim a pod would get carries
    them; with the gate off the same buffer is ignored."""

    async def add(kube: kc.KubeClient) -> None:
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "chunk"},
            "template": {"spec": harness.pod("x", scene.pool, cpu="2")["spec"]},
        }
        await kube.create(kc.PODTEMPLATES, template, scene.ns)
        buffer = {
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityBuffer",
            "metadata": {"name": "warm"},
            "spec": {"podTemplateRef": {"name": "chunk"}, "replicas": 1},
        }
        await kube.create(kc.CAPACITYBUFFERS, buffer, scene.ns)

    async def status(kube: kc.KubeClient) -> object:
        return (await kube.get(kc.CAPACITYBUFFERS, "warm", scene.ns)).get("status")

    async def run(step: Callable[[kc.KubeClient], Awaitable[Any]]) -> Any:
        async with kc.connect(control_plane.kubeconfig) as kube:
            return await step(kube)

    anyio.run(run, add)
    args = ("explain", "pod", f"{scene.ns}/wide", "--kubeconfig", str(control_plane.kubeconfig))
    gated = karpenter(*args, "--output", "json", env={"FEATURE_GATES": "CapacityBuffer=true"})
    assert gated.returncode == 0, gated.stderr
    claim = json.loads(gated.stdout)["nodeClaim"]
    assert claim["pods"] == [f"{scene.ns}/wide"]
    assert claim["capacityBufferPods"] == [f"{scene.ns}/capacity-buffer-warm-1"]
    plain = _explain(control_plane, "pod", f"{scene.ns}/wide")
    assert "capacityBufferPods" not in plain["nodeClaim"]
    assert anyio.run(run, status) is None  # explain wrote nothing
