"""The Kubernetes client: JSON in, JSON out, typed errors, on kubernetes_asyncio's transport.

The generated typed models are skipped on purpose: informers hand plain dicts to the
decoders in ``karpenter.api`` (fast, and they name bad fields), and the controllers write
merge patches. kubernetes_asyncio still loads kubeconfigs / in-cluster credentials and owns
the TLS session. Watches are read as raw newline-delimited JSON so a large object never hits
a line-length limit.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from karpenter.aio.ratelimit import TokenBucket
from karpenter.kube import errors

Obj = dict[str, Any]

_TLS_CLOSE_PAUSE_S = 0.25
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


@dataclass(frozen=True, slots=True)
class Resource:
    """An API resource: where its collection lives."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        """``group/version`` (``v1`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str = "", subresource: str = "") -> str:
        """The URL path of the collection, an object, or one of its subresources."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", "Node")
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace")
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume")
STORAGECLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass")
CSINODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode")
NODEOVERLAYS = Resource("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay")
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
SERVICES = Resource("", "v1", "services", "Service", namespaced=True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
REPLICATIONCONTROLLERS = Resource(
    "", "v1", "replicationcontrollers", "ReplicationController", namespaced=True
)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True)
VOLUMEATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", "NodePool")
NODECLAIMS = Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim")
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition"
)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, with the object."""

    type: str
    object: Obj


class KubeClient:
    """A narrow JSON client over one kubernetes_asyncio ``ApiClient`` (not owned)."""

    def __init__(self, api: k8s.ApiClient, limiter: TokenBucket | None = None) -> None:
        self.api = api
        # KUBE_CLIENT_QPS/BURST; watches are long-lived streams and are not throttled
        self.limiter = limiter

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object = None,
        content_type: str = JSON,
        request_timeout: aiohttp.ClientTimeout | float | None = 30.0,
        throttle: bool = True,
        accept: str = JSON,
    ) -> aiohttp.ClientResponse:
        if throttle and self.limiter is not None:
            await self.limiter.acquire()
        try:
            resp: aiohttp.ClientResponse = await self.api.call_api(
                path,
                method,
                query_params=list(query),
                header_params={"Accept": accept, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=request_timeout,
            )
        except ApiException as err:  # raised by the transport for some failures
            raise errors.ApiError(int(err.status or 0), str(err.reason or "")) from err
        if resp.status >= 300:
            try:
                payload = await resp.json(content_type=None)
            except (ValueError, aiohttp.ClientError):
                payload = None
            finally:
                resp.release()
            raise errors.from_status(resp.status, payload)
        return resp

    async def _json(self, method: str, path: str, **kwargs: Any) -> Obj:
        resp = await self._call(method, path, **kwargs)
        try:
            data = await resp.json(content_type=None)
        finally:
            resp.release()
        return data if isinstance(data, dict) else {}

    async def server_version(self) -> str:
        """The apiserver's ``major.minor`` (``1.34``), as AMI aliases and upstream use it."""
        info = await self._json("GET", "/version")
        major = str(info.get("major", "")).rstrip("+")
        minor = str(info.get("minor", "")).rstrip("+")
        return f"{major}.{minor}"

    async def discovery(self, group_version: str) -> Obj:
        """The APIResourceList of ``group/version`` (NotFound when the group is not served)."""
        return await self._json("GET", f"/apis/{group_version}", request_timeout=10.0)

    async def table(self, res: Resource, namespace: str | None = None) -> Obj:
        """The collection as a ``meta.k8s.io/v1`` Table: the columns ``kubectl get`` prints."""
        return await self._json("GET", res.path(namespace), accept=TABLE)

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        """One object (NotFound if absent)."""
        return await self._json("GET", res.path(namespace, name))

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> tuple[list[Obj], str]:
        """Every object of a collection, and the list's resourceVersion (to watch from)."""
        query = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        data = await self._json("GET", res.path(namespace), query=query, request_timeout=120.0)
        items = data.get("items") or []
        for item in items:
            # list items carry no kind; the decoders and event references want it
            item.setdefault("kind", res.kind)
            item.setdefault("apiVersion", res.api_version)
        return items, str((data.get("metadata") or {}).get("resourceVersion") or "")

    @asynccontextmanager
    async def watch(
        self, res: Resource, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        """Stream changes after ``resource_version``; an ERROR event becomes a typed error."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        # No total timeout: the server ends the watch after timeoutSeconds; the read timeout
        # catches a silently dead connection (bookmarks arrive about once a minute).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout_seconds + 30)
        resp = await self._call(
            "GET", res.path(), query=query, request_timeout=timeout, throttle=False
        )
        try:
            yield _events(resp, res)
        finally:
            resp.release()

    async def create(
        self, res: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        """Create an object (AlreadyExists, Invalid)."""
        return await self._json("POST", res.path(namespace), body=dict(body))

    async def merge_patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str = "",
    ) -> Obj:
        """JSON merge patch (RFC 7386); lists are replaced whole."""
        return await self._json(
            "PATCH",
            res.path(namespace, name, subresource),
            body=dict(patch),
            content_type=MERGE_PATCH,
        )

    async def json_patch(
        self,
        res: Resource,
        name: str,
        ops: Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        subresource: str = "",
    ) -> Obj:
        """JSON patch (RFC 6902): a ``test`` op on resourceVersion makes it an optimistic lock."""
        return await self._json(
            "PATCH",
            res.path(namespace, name, subresource),
            body=[dict(op) for op in ops],
            content_type=JSON_PATCH,
        )

    async def replace(
        self, res: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        """PUT (Conflict when ``metadata.resourceVersion`` is stale)."""
        return await self._json("PUT", res.path(namespace, name), body=dict(body))

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_s: int | None = None,
        uid: str = "",
    ) -> None:
        """Delete (NotFound when already gone); background propagation, like kubectl.

        With ``uid`` the delete is refused (Conflict) when the name now holds another object.
        """
        body = _delete_options(grace_period_s, uid)
        body["propagationPolicy"] = "Background"
        resp = await self._call("DELETE", res.path(namespace, name), body=body)
        resp.release()

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        """Ask the Eviction API (policy/v1) to delete a pod, honouring its PodDisruptionBudgets.

        TooManyRequests: a PDB refuses now; MultiplePDBs; NotFound: gone; Conflict: the name
        holds another pod (the UID precondition failed).
        """
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": _delete_options(None, uid),
        }
        resp = await self._call("POST", PODS.path(namespace, name, "eviction"), body=body)
        resp.release()


def _delete_options(grace_period_s: int | None, uid: str) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if grace_period_s is not None:
        body["gracePeriodSeconds"] = grace_period_s
    if uid:
        body["preconditions"] = {"uid": uid}
    return body


async def _events(resp: aiohttp.ClientResponse, res: Resource) -> AsyncIterator[WatchEvent]:
    buffer = b""
    async for chunk in resp.content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield _event(json.loads(line), res)


def _event(raw: Mapping[str, Any], res: Resource) -> WatchEvent:
    kind = str(raw.get("type") or "")
    obj = raw.get("object") or {}
    if kind == "ERROR":
        raise errors.from_status(int(obj.get("code") or 500), obj)
    obj.setdefault("kind", res.kind)
    obj.setdefault("apiVersion", res.api_version)
    return WatchEvent(kind, obj)


async def load_configuration(kubeconfig: Path | str | None) -> k8s.Configuration:
    """Client configuration from a kubeconfig file, else the in-cluster service account.

    Failures raise ``errors.KubeconfigError`` with one line naming the file and the cause.
    """
    cfg = k8s.Configuration()
    if not kubeconfig:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException:
            raise errors.KubeconfigError(
                "no kubeconfig: pass --kubeconfig or set KUBECONFIG (this is not a pod in a"
                " cluster: KUBERNETES_SERVICE_HOST is unset)"
            ) from None
        return cfg
    path = Path(kubeconfig)
    if not await anyio.Path(path).is_file():
        raise errors.KubeconfigError(f"kubeconfig {path}: no such file")
    await _check_kubeconfig(path)
    try:
        await k8s_config.load_kube_config(
            config_file=str(path), client_configuration=cfg, persist_config=False
        )
    # the loader fails with its own error, or with whatever a malformed document trips on
    except (k8s_config.ConfigException, OSError, ValueError, TypeError, KeyError) as err:
        raise errors.KubeconfigError(f"kubeconfig {path}: {_first_line(err)}") from None
    return cfg


async def _check_kubeconfig(path: Path) -> None:
    """The loader's own errors for a file that is not a kubeconfig at all are cryptic."""
    try:
        doc = yaml.safe_load(await anyio.Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise errors.KubeconfigError(f"kubeconfig {path}: {_first_line(err)}") from None
    if not isinstance(doc, dict) or not doc.get("contexts") or not doc.get("clusters"):
        raise errors.KubeconfigError(
            f"kubeconfig {path}: not a kubeconfig (no clusters or contexts)"
        )


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


@asynccontextmanager
async def connect(kubeconfig: Path | str | None) -> AsyncIterator[KubeClient]:
    """A KubeClient with its own connection pool, closed on exit."""
    cfg = await load_configuration(kubeconfig)
    try:
        async with k8s.ApiClient(configuration=cfg) as api:
            api.user_agent = "karpenter-py/0.1.0"
            yield KubeClient(api)
    finally:
        # TLS transports finish closing a moment after the session does (aiohttp's documented
        # graceful-shutdown pause); without it a closing event loop reports them unclosed.
        with anyio.CancelScope(shield=True):
            await anyio.sleep(_TLS_CLOSE_PAUSE_S)
