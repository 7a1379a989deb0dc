"""Helm for tests: the cached binary (built by hack/install-helm.sh) and `helm template`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "karpenter"
_BUILD_TIMEOUT_S = 900


def helm_binary() -> str:
    """Path to helm, building it on first use; a failed build raises (tests fail, never skip)."""
    done = subprocess.run(
        [str(ROOT / "hack" / "install-helm.sh")],
        capture_output=True,
        text=True,
        timeout=_BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"hack/install-helm.sh failed:\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


def render(
    helm: str,
    *sets: str,
    namespace: str = "karpenter",
    release: str = "k",
    json_sets: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """`helm template` output as a list of documents (CRDs not included)."""
    args = [helm, "template", release, str(CHART), "--namespace", namespace]
    for item in sets:
        args += ["--set", item]
    for item in json_sets:  # structured values (key=<JSON>)
        args += ["--set-json", item]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]
