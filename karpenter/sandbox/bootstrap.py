"""Bootstrapping a sandbox cluster: install Karpenter's CRDs and an example NodePool.

``karpenter sandbox`` starts a local control plane, then calls these to make it ready for
the controller: every CRD in ``config/crd`` is created (or left as is) and awaited until the
apiserver reports it Established, and a NodePool ``default`` with no requirements is applied
so that any pending pod gets a node from the simulated cloud.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from karpenter.aio.clock import Clock
from karpenter.kube import client as kc
from karpenter.kube import codec, errors

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"
ESTABLISH_TIMEOUT_S = 60.0

DEFAULT_NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                # The simulated cloud has no NodeClass kind; the reference is still required.
                "nodeClassRef": {
                    "group": "simulated.karpenter.sh",
                    "kind": "SimulatedNodeClass",
                    "name": "default",
                },
                "requirements": [],
            }
        },
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
    },
}


def crd_documents(crd_dir: Path = CRD_DIR) -> list[dict[str, Any]]:
    """Every CRD manifest under ``crd_dir``."""
    docs: list[dict[str, Any]] = []
    for path in sorted(crd_dir.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d)
    return docs


async def install_crds(kube: kc.KubeClient, clock: Clock, crd_dir: Path = CRD_DIR) -> list[str]:
    """Create the CRDs (existing ones are kept) and wait until all are Established."""
    names = []
    for doc in crd_documents(crd_dir):
        try:
            await kube.create(kc.CRDS, doc)
        except errors.AlreadyExists:
            pass
        names.append(codec.name(doc))
    deadline = clock.now() + ESTABLISH_TIMEOUT_S
    pending = set(names)
    while pending:
        for name in sorted(pending):
            if codec.condition_true(await kube.get(kc.CRDS, name), "Established"):
                pending.discard(name)
        if pending:
            if clock.now() > deadline:
                raise TimeoutError(f"CRDs not Established: {sorted(pending)}")
            await clock.sleep(0.2)
    return names


async def apply_default_nodepool(kube: kc.KubeClient) -> None:
    """Create the example NodePool ``default`` unless one exists."""
    try:
        await kube.create(kc.NODEPOOLS, DEFAULT_NODEPOOL)
    except errors.AlreadyExists:
        pass
