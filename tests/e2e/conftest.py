"""The e2e control-plane fixture: one real apiserver per session with Karpenter's CRDs installed.

Binaries (the control plane, and kwok: hack/build-kwok.sh) are built (or found in the cache)
once, right after collection and only when e2e tests were selected, so a cold ~minutes-long Go
build does not count against any single test's timeout. kwok runs beside the control plane and
plays the kubelet of the simulated cloud's Nodes: they turn Ready, their pods Running, deleted
pods go after their grace period. A build or startup failure makes the e2e tests fail, never skip.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client, config

from karpenter.kube import client as kc
from karpenter.sandbox import kwok
from karpenter.sandbox.controlplane import LocalControlPlane, ensure_binaries

CRD_DIR = Path(__file__).resolve().parents[2] / "config" / "crd"
_E2E_DIR = Path(__file__).resolve().parent
_CRD_ESTABLISH_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ControlPlane:
    """What e2e tests get: where the apiserver is and how to authenticate to it."""

    kubeconfig: Path
    server: str
    local: LocalControlPlane


@dataclass
class _Binaries:
    bin_dir: Path | None = None
    kwok_dir: Path | None = None
    error: BaseException | None = None


_binaries = _Binaries()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: runs against a real local Kubernetes control plane (tests/e2e)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test under tests/e2e needs the control plane, so it is marked here rather than relying
    # on each module to remember; `-m "not e2e"` then deselects them all.
    for item in items:
        if _E2E_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if not any(item.get_closest_marker("e2e") for item in session.items):
        return
    try:
        _binaries.bin_dir = ensure_binaries()
        _binaries.kwok_dir = kwok.ensure_kwok()
    except Exception as exc:  # reported by the fixture, so each e2e test fails with the cause
        _binaries.error = exc


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if _binaries.error is not None:
        raise _binaries.error
    bin_dir = _binaries.bin_dir or ensure_binaries()
    kwok_dir = _binaries.kwok_dir or kwok.ensure_kwok()
    work_dir = tmp_path_factory.mktemp("controlplane")
    with LocalControlPlane(bin_dir, work_dir, kwok=kwok.KwokOptions(kwok_dir)) as local:
        asyncio.run(install_crds(local.kubeconfig))
        yield ControlPlane(kubeconfig=local.kubeconfig, server=local.server, local=local)


@pytest_asyncio.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    """A kubernetes_asyncio client bound to the session's control plane (one per test loop)."""
    async with await new_api_client(control_plane.kubeconfig) as api_client:
        yield api_client


@pytest_asyncio.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[kc.KubeClient]:
    """The project's own client on the session's control plane (one per test loop)."""
    async with kc.connect(control_plane.kubeconfig) as kube_client:
        yield kube_client


@pytest_asyncio.fixture
async def kube2(control_plane: ControlPlane) -> AsyncIterator[kc.KubeClient]:
    """A second client of the project's own, as a second replica would have."""
    async with kc.connect(control_plane.kubeconfig) as kube_client:
        yield kube_client


async def new_api_client(kubeconfig: Path) -> client.ApiClient:
    """An admin ApiClient; use as `async with await new_api_client(...)`."""
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=cfg, persist_config=False
    )
    return client.ApiClient(configuration=cfg)


def crd_documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


async def install_crds(kubeconfig: Path) -> None:
    """Create every CRD in config/crd and wait until the apiserver reports it Established."""
    async with await new_api_client(kubeconfig) as api_client:
        ext = client.ApiextensionsV1Api(api_client)
        names = []
        for doc in crd_documents():
            # The client sends plain dicts verbatim; round-tripping the YAML through the typed
            # models would only risk dropping schema fields the models do not know.
            body: Any = doc
            await ext.create_custom_resource_definition(body=body)
            names.append(doc["metadata"]["name"])
        deadline = time.monotonic() + _CRD_ESTABLISH_TIMEOUT_S
        pending = set(names)
        while pending:
            for name in sorted(pending):
                crd = await ext.read_custom_resource_definition(name)
                conditions = {c.type: c for c in (crd.status.conditions or [])}
                if "NonStructuralSchema" in conditions:
                    raise AssertionError(f"{name}: {conditions['NonStructuralSchema'].message}")
                established = conditions.get("Established")
                if established is not None and established.status == "True":
                    pending.discard(name)
            if pending and time.monotonic() > deadline:
                raise AssertionError(f"CRDs not Established after 60s: {sorted(pending)}")
            await asyncio.sleep(0.2)
