"""The Kubernetes client: JSON in, JSON out, typed errors, over one aiohttp session.

There are no generated typed models: informers hand plain dicts to the decoders in
``karpenter.api`` (fast, and they name bad fields), and the controllers write merge patches.
``transport`` loads the kubeconfig / in-cluster credentials and opens the session. Watches are
read as raw newline-delimited JSON so a large object never hits a line-length limit. JSON is
read and written with orjson: a 1000-pod burst brings ~5000 watch events, and the stdlib's
decoder was 9% of the controller's CPU in it (py-spy, basic scale-out), orjson's a third of that.

HTTP/1.1 needs one connection per request in flight, and each TLS connection costs about
170 kB (asyncio's 128 kB read buffer plus OpenSSL's); a 1000-pod burst put ~270 of them open
at once (~45 MB). Requests therefore take one of ``MAX_IN_FLIGHT`` slots while they run, so at
most that many connections serve requests (watches, long-lived, hold their own); the rest
wait for a slot, as client-go's requests share one HTTP/2 connection's streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson

from karpenter.aio.ratelimit import TokenBucket
from karpenter.kube import errors, transport

Obj = dict[str, Any]

_TLS_CLOSE_PAUSE_S = 0.25
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
# Requests in flight at once (see the module docstring). At 200 QPS a request may take
# 160 ms before the slots, not the rate limit, pace the client.
MAX_IN_FLIGHT = 32


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
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
REPLICATIONCONTROLLERS = Resource(
    "", "v1", "replicationcontrollers", "ReplicationController", namespaced=True
)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True)
VOLUMEATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", "NodePool")
PODTEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", namespaced=True)
CAPACITYBUFFERS = Resource(
    "autoscaling.x-k8s.io", "v1beta1", "capacitybuffers", "CapacityBuffer", namespaced=True
)
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
    """A narrow JSON client over one HTTP session (not owned)."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        creds: transport.Credentials,
        limiter: TokenBucket | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self.http = http
        self.creds = creds
        # KUBE_CLIENT_QPS/BURST; watches are long-lived streams and are not throttled
        self.limiter = limiter
        self.max_in_flight = max_in_flight
        self._slots: anyio.Semaphore | None = None  # made on first use, inside the loop

    def _slot(self) -> anyio.Semaphore:
        if self._slots is None:
            self._slots = anyio.Semaphore(self.max_in_flight)
        return self._slots

    @asynccontextmanager
    async def _request(
        self, method: str, path: str, **kwargs: Any
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A non-streaming request holding an in-flight slot until its body is read (the
        rate limit's token first: a request waiting for a token holds no slot)."""
        if kwargs.pop("throttle", True) and self.limiter is not None:
            await self.limiter.acquire()
        async with self._slot():
            resp = await self._call(method, path, throttle=False, **kwargs)
            try:
                yield resp
            finally:
                resp.release()

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
        headers = {"Accept": accept, "Content-Type": content_type}
        if self.creds.token is not None:
            headers["Authorization"] = f"Bearer {await self.creds.token()}"
        timeout = (
            request_timeout
            if isinstance(request_timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=request_timeout)
        )
        resp = await self.http.request(
            method,
            self.creds.server + path,
            params=list(query) or None,
            data=None if body is None else orjson.dumps(body),
            headers=headers,
            timeout=timeout,
            server_hostname=self.creds.server_hostname,
        )
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
        async with self._request(method, path, **kwargs) as resp:
            body = await resp.read()
        data = orjson.loads(body) if body else None
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
        self,
        res: Resource,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        throttle: bool = True,
    ) -> Obj:
        """Create an object (AlreadyExists, Invalid); ``throttle=False`` for callers that
        pace themselves (the event recorder's own rate limit)."""
        return await self._json("POST", res.path(namespace), body=dict(body), throttle=throttle)

    async def reserve(self, n: int) -> None:
        """Take ``n`` tokens of the throttle at once, for ``n`` requests the caller then sends
        with ``throttle=False`` back to back: a sequence whose last request unblocks others
        (a registration's nominations, then the Node write that opens the node) does not
        queue that last request behind every token other callers took meanwhile."""
        if self.limiter is not None and n > 0:
            await self.limiter.acquire(n)

    async def merge_patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str = "",
        *,
        throttle: bool = True,
    ) -> Obj:
        """JSON merge patch (RFC 7386); lists are replaced whole."""
        return await self._json(
            "PATCH",
            res.path(namespace, name, subresource),
            body=dict(patch),
            content_type=MERGE_PATCH,
            throttle=throttle,
        )

    async def json_patch(
        self,
        res: Resource,
        name: str,
        ops: Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        subresource: str = "",
        *,
        throttle: bool = True,
    ) -> Obj:
        """JSON patch (RFC 6902): a ``test`` op on resourceVersion makes it an optimistic lock."""
        return await self._json(
            "PATCH",
            res.path(namespace, name, subresource),
            body=[dict(op) for op in ops],
            content_type=JSON_PATCH,
            throttle=throttle,
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
        async with self._request("DELETE", res.path(namespace, name), body=body):
            pass

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
        async with self._request("POST", PODS.path(namespace, name, "eviction"), body=body):
            pass


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
        # one split per chunk: splitting off a line at a time copies the rest of a large
        # chunk once per event (quadratic in the events a burst delivers at once)
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                yield _event(orjson.loads(line), res)


def _event(raw: Mapping[str, Any], res: Resource) -> WatchEvent:
    kind = str(raw.get("type") or "")
    obj = raw.get("object") or {}
    if kind == "ERROR":
        raise errors.from_status(int(obj.get("code") or 500), obj)
    obj.setdefault("kind", res.kind)
    obj.setdefault("apiVersion", res.api_version)
    return WatchEvent(kind, obj)


@asynccontextmanager
async def connect(kubeconfig: Path | str | None) -> AsyncIterator[KubeClient]:
    """A KubeClient with its own connection pool, closed on exit."""
    creds = transport.load(kubeconfig)
    try:
        async with transport.session(creds) as http:
            yield KubeClient(http, creds)
    finally:
        # TLS transports finish closing a moment after the session does (aiohttp's documented
        # graceful-shutdown pause); without it a closing event loop reports them unclosed.
        with anyio.CancelScope(shield=True):
            await anyio.sleep(_TLS_CLOSE_PAUSE_S)
