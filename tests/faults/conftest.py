"""The fault matrix's own control plane: audit log on, CRDs installed, one per session.

Separate from the e2e session's plane because these experiments restart its apiserver,
compact its etcd and read its audit log; nothing they do may disturb the e2e tests. kwok runs
beside it, as on the e2e plane: it plays the kubelet of the simulated cloud's Nodes (Ready, pods
Running, deleted pods gone after their grace period) and leaves every other Node alone (the AWS
experiments' node agent makes Nodes kwok does not adopt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from karpenter.sandbox import kwok
from karpenter.sandbox.controlplane import LocalControlPlane, ensure_binaries
from tests.e2e.conftest import ControlPlane, install_crds
from tests.faults import audit, aws


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: a fault-matrix experiment (tests/faults)")
    # the experiments run a real control plane, as the e2e tests do (``-m "not e2e"`` skips them)
    config.addinivalue_line("markers", "e2e: runs against a real local Kubernetes control plane")


@pytest.fixture(scope="session")
def fault_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane with the audit log on, kwok beside it and Karpenter's CRDs installed."""
    work_dir = tmp_path_factory.mktemp("faultplane")
    options = kwok.KwokOptions(kwok.ensure_kwok())
    with LocalControlPlane(
        ensure_binaries(), work_dir, audit_policy=audit.POLICY, kwok=options
    ) as local:
        asyncio.run(install_crds(local.kubeconfig))
        yield ControlPlane(kubeconfig=local.kubeconfig, server=local.server, local=local)


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """A moto server on loopback for the AWS experiments (each uses its own cluster name)."""
    with aws.moto_server() as url:
        yield url
