"""NodeClaim lifecycle: launch through the cloud, register the Node, see it initialized.

Each reconcile runs the steps in order on one copy of the claim and stops at the first that
is not done, like upstream's lifecycle controller:

1. Launch: ``CloudProvider.create``. Insufficient capacity → event, delete the claim (the
   provisioner tries again with fresh offerings); NodeClass not ready → delete; other errors →
   ``Launched=Unknown`` and retry with backoff, deleting the claim after the launch timeout.
2. Registration: the Node with the claim's providerID gets the claim's labels, taints, an
   owner reference and the ``karpenter.sh/termination`` finalizer (deleting it drains it),
   loses ``karpenter.sh/unregistered`` and gains ``karpenter.sh/registered``.
   No Node before the registration timeout → delete the claim.
3. Initialization: the Node is Ready, startup and known ephemeral taints are gone and every
   requested extended resource is allocatable → ``karpenter.sh/initialized``.

Status is written once per reconcile with the whole condition list (only this controller
writes NodeClaim status), and the answer goes back into the mirror at once so the next
reconcile never acts on a version older than its own write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import anyio
import anyio.abc

from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.cloud.provider import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.controllers.nominations import NominationPublisher
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.node import NodeClaim
from karpenter.core.provisioning.existing import is_ephemeral
from karpenter.core.scheduling.taints import Taint
from karpenter.kube import codec, errors, events
from karpenter.kube.client import NODECLAIMS, NODES, Obj


class RegistrationOutcomes(Protocol):
    """Who counts registration outcomes per NodePool (``registration_health`` does): a port,
    so lifecycle does not import another controller."""

    async def observe(
        self, claim: NodeClaim, owners: list[Obj], registered: bool, reason: str, message: str
    ) -> None: ...


LAUNCH_TIMEOUT_S = 300.0
REGISTRATION_TIMEOUT_S = 900.0
_MAX_MESSAGE = 300
_CONFLICT_RETRY_S = 0.1


def _true(conds: list[Obj], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conds)


class Lifecycle(Controller):
    """Drives every NodeClaim that is not being deleted from created to initialized."""

    # Set by the composition root: fed each registration and each launch / registration
    # timeout (NodePool ``NodeRegistrationHealthy``).
    registration_health: RegistrationOutcomes | None = None
    # Set by the composition root with PublishNominations: the claim's pods are nominated to
    # its Node before registration lifts karpenter.sh/unregistered (nothing binds before).
    nominations: NominationPublisher | None = None

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        launch_timeout_s: float = LAUNCH_TIMEOUT_S,
        registration_timeout_s: float = REGISTRATION_TIMEOUT_S,
        concurrency: int = 100,
    ) -> None:
        super().__init__(ctx, "nodeclaim.lifecycle")
        self.launch_timeout_s = launch_timeout_s
        self.registration_timeout_s = registration_timeout_s
        self.concurrency = concurrency
        self.queue: KeyedQueue[str] = KeyedQueue(self.clock, "nodeclaim.lifecycle")
        self.failures: dict[str, int] = {}
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "NodeClaim" and obj is not None:
            self.queue.add(key)
        elif kind == "Node":
            provider_id = str((obj or {}).get("spec", {}).get("providerID") or "")
            for name in self.state.claims_of_node(key, provider_id):
                self.queue.add(name)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Reconcile NodeClaims forever."""
        for name in list(self.state.nodeclaims.entries):
            self.queue.add(name)
        task_status.started()
        await self.queue.run(self.reconcile, self.concurrency)

    async def reconcile(self, name: str) -> float | None:
        """One pass over one NodeClaim; returns when to look again (None: on change)."""
        raw = self.state.nodeclaims.raw(name)
        claim = self.state.nodeclaims.get(name)
        if raw is None or claim is None or codec.meta(raw).get("deletionTimestamp"):
            self.failures.pop(name, None)  # backoff state dies with the claim
            return None
        log = self._log.bind(nodeclaim=name)
        conds = codec.conditions(raw)
        status: dict[str, Any] = {}
        if not codec.condition_true(raw, "Launched"):
            launched = await self._launch(raw, claim, conds, status, log)
            if launched is None:
                return await self._launch_failed(raw, conds, status)
            self.failures.pop(name, None)
            # Persist the launch before anything else can fail: a reconcile that failed later
            # (say, a Conflict patching the Node) must not call create a second time.
            self._set_ready(conds)
            if not self.state.node_by_provider_id(launched.provider_id):
                # what registration would write next, in this same write: a second status
                # write here holds up the reconcile that registers the Node once it appears
                self._not_registered_yet(conds)
            await self._write_status(raw, conds, status)
            # The provider reports status (provider ID, type, capacity), not the claim's spec:
            # registration and initialization read the stored claim, whose startup taints
            # initialization must see gone (a claim taken as initialized while they remain
            # would offer its node to pods that cannot land there: a duplicate launch).
            stored = self.state.nodeclaims.get(name)
            claim = stored if stored is not None and stored.provider_id else launched
            raw = self.state.nodeclaims.raw(name) or raw
            conds, status = codec.conditions(raw), {}
        try:
            requeue = await self._register(raw, claim, conds, status, log)
            # Initialized is sticky, as upstream: a Node going NotReady later is not the
            # business of initialization (repair and disruption handle it).
            if requeue is None and _true(conds, "Registered") and not _true(conds, "Initialized"):
                requeue = await self._initialize(raw, claim, conds, status)
        except errors.Conflict:
            requeue = _CONFLICT_RETRY_S  # the Node changed under us; status so far still goes out
        self._set_ready(conds)
        await self._write_status(raw, conds, status)
        return requeue

    # ---- launch -----------------------------------------------------------------------------

    async def _launch(
        self,
        raw: Obj,
        claim: NodeClaim,
        conds: list[Obj],
        status: dict[str, Any],
        log: Any,
    ) -> NodeClaim | None:
        try:
            launched = await self.cloud.create(claim)
        except CloudProviderError as err:
            await self._launch_error(raw, err, conds, log)
            return None
        labels = dict(launched.labels)
        labels.update(claim.labels)  # the claim's own labels win over the provider's
        if labels != dict(claim.labels):
            obj = await self.kube.merge_patch(
                NODECLAIMS, claim.name, {"metadata": {"labels": labels}}
            )
            self.state.nodeclaims.upsert(obj)
            meta = raw.setdefault("metadata", {})
            meta["labels"] = labels
            # the status write that follows locks on this version: the claim's own label write
            # must not make it a Conflict (a re-read and a second write, seconds under load)
            meta["resourceVersion"] = codec.meta(obj).get("resourceVersion")
        status.update(
            providerID=launched.provider_id,
            imageID=launched.image_id,
            capacity=codec.resource_list(launched.capacity),
            allocatable=codec.resource_list(launched.allocatable),
        )
        codec.set_condition(conds, "Launched", "True", "Launched", "", self.clock.now())
        self.metrics.nodeclaims_launched.labels(nodepool=claim.nodepool).inc()
        log.info("launched", provider_id=launched.provider_id)
        return launched

    async def _launch_error(
        self, raw: Obj, err: CloudProviderError, conds: list[Obj], log: Any
    ) -> None:
        """Branch on the error type: capacity and NodeClass errors end the claim, others
        are surfaced on ``Launched`` and retried."""
        now = self.clock.now()
        if isinstance(err, InsufficientCapacityError):
            for ref in err.offerings:
                self.state.unavailable.mark(ref.instance_type, ref.zone, ref.capacity_type, now)
            await self._event(raw, events.WARNING, "InsufficientCapacityError", str(err))
            await self._delete(raw, "insufficient_capacity", log)
            return
        if isinstance(err, NodeClassNotReadyError):
            await self._event(raw, events.WARNING, "NodeClassNotReady", str(err))
            await self._delete(raw, "nodeclass_not_ready", log)
            return
        reason = err.reason if isinstance(err, CreateError) else "LaunchFailed"
        message = str(err)
        if len(message) > _MAX_MESSAGE:
            message = message[:_MAX_MESSAGE] + "..."
        codec.set_condition(conds, "Launched", "Unknown", reason, message, now)
        log.warning("launch failed", error=str(err))

    async def _launch_failed(
        self, raw: Obj, conds: list[Obj], status: dict[str, Any]
    ) -> float | None:
        if self.state.nodeclaims.raw(codec.name(raw)) is None or not conds:
            return None  # deleted (capacity / nodeclass), nothing more to write
        name = codec.name(raw)
        created = codec.parse_time(codec.meta(raw).get("creationTimestamp")) or self.clock.now()
        if self.clock.now() - created > self.launch_timeout_s:
            await self._observe_health(raw, conds, registered=False)
            await self._delete(raw, "launch_timeout", self._log.bind(nodeclaim=name))
            return None
        await self._write_status(raw, conds, status)
        failures = self.failures.get(name, 0) + 1
        self.failures[name] = failures
        return float(min(2 ** (failures - 1), 60))

    # ---- registration -----------------------------------------------------------------------

    async def _register(
        self, raw: Obj, claim: NodeClaim, conds: list[Obj], status: dict[str, Any], log: Any
    ) -> float | None:
        now = self.clock.now()
        nodes = self.state.node_by_provider_id(claim.provider_id)
        if len(nodes) > 1:
            codec.set_condition(conds, "Registered", "False", "MultipleNodesFound", "", now)
            return None
        if not nodes and _true(conds, "Registered"):
            # The Node was deleted out from under a registered claim (upstream's Node finalizer
            # would delete the claim): let the claim go, so its instance is terminated too.
            await self._delete(raw, "", log)
            return None
        if not nodes:
            self._not_registered_yet(conds)
            return await self._registration_deadline(raw, conds, log)
        node = nodes[0]
        if _true(conds, "Registered") and (
            (node.get("metadata", {}).get("labels") or {}).get(lbl.REGISTERED) == "true"
        ):
            await self._ensure_finalizer(node)
            return None
        throttle = True
        if self.nominations is not None and not self.nominations.held:
            name = codec.name(node)
            pods = self.nominations.pending((claim.name, name), name)
            # One reservation of the throttle for the nominations and the Node write that
            # opens the node, sent back to back: queued behind the tokens that other
            # registrations of a burst took meanwhile, the Node write came 1.5-2.4 s after its
            # nominations, and every attempt the kube-scheduler made for those pods in that
            # gap found the node still tainted and cleared the nomination.
            await self.kube.reserve(len(pods) + 1)
            await self.nominations.write(pods, name, throttle=False)
            throttle = False
        patched = await self._sync_node(node, raw, claim, throttle=throttle)
        self.state.nodes.upsert(patched)
        status["nodeName"] = codec.name(node)
        codec.set_condition(conds, "Registered", "True", "Registered", "", now)
        self.metrics.nodeclaims_registered.labels(nodepool=claim.nodepool).inc()
        await self._observe_health(raw, conds, registered=True)
        zone = (codec.meta(patched).get("labels") or {}).get(lbl.ZONE, "")
        self.metrics.nodes_created.labels(nodepool=claim.nodepool, zone=zone).inc()
        log.info("registered", node=codec.name(node))
        return None

    def _not_registered_yet(self, conds: list[Obj]) -> None:
        message = "Node not registered with cluster"
        now = self.clock.now()
        codec.set_condition(conds, "Registered", "Unknown", "NodeNotFound", message, now)

    async def _registration_deadline(self, raw: Obj, conds: list[Obj], log: Any) -> float | None:
        launched = codec.condition(raw, "Launched") or next(
            (c for c in conds if c.get("type") == "Launched"), None
        )
        since = codec.parse_time((launched or {}).get("lastTransitionTime")) or self.clock.now()
        remaining = since + self.registration_timeout_s - self.clock.now()
        if remaining <= 0:
            await self._observe_health(raw, conds, registered=False)
            await self._delete(raw, "registration_timeout", log)
            return None
        return remaining

    async def _observe_health(self, raw: Obj, conds: list[Obj], *, registered: bool) -> None:
        """One outcome for the NodePool's ``NodeRegistrationHealthy`` window."""
        health = self.registration_health
        claim = self.state.nodeclaims.get(codec.name(raw))
        if health is None or claim is None:
            return
        launched = next((c for c in conds if c.get("type") == "Launched"), None) or {}
        if launched.get("status") == "True":
            reason, message = "RegistrationFailed", "Failed to register node"
        else:  # the launch itself never succeeded: its own reason says why
            reason = str(launched.get("reason") or "LaunchFailed")
            message = str(launched.get("message") or "")
        owners = list(codec.meta(raw).get("ownerReferences") or [])
        try:
            await health.observe(claim, owners, registered, reason, message)
        except errors.ApiError as err:
            self._log.warning("registration health not written", error=str(err))

    async def _sync_node(
        self, node: Obj, raw: Obj, claim: NodeClaim, *, throttle: bool = True
    ) -> Obj:
        meta = codec.meta(node)
        labels = dict(meta.get("labels") or {})
        labels.update(claim.labels)
        labels[lbl.REGISTERED] = "true"
        taints = [t for t in codec.taints_of(node) if t.get("key") != lbl.TAINT_UNREGISTERED]
        if labels.get(lbl.DO_NOT_SYNC_TAINTS) != "true":
            wanted = [codec.taint(t) for t in (*claim.taints, *claim.startup_taints)]
            if not codec.condition_true(raw, "Registered"):
                taints = codec.merge_taints(taints, wanted)
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("uid") != codec.uid(raw)]
        owners.append(codec.owner_reference(raw))
        finalizers = _with_finalizer(node)
        # A Node already Ready with nothing left to wait for is initialized in the same write
        # (one Node update fewer: each one sends the kube-scheduler's waiting pods round again).
        after = {**node, "spec": {**(node.get("spec") or {}), "taints": taints}}
        if _not_initialized(after, claim) == ("", ""):
            labels[lbl.INITIALIZED] = "true"
        # A JSON patch that locks only what it replaces whole (taints, owner references,
        # finalizers: a ``test`` of each list as read) and sets labels one by one: another
        # writer's change to those lists (a CNI agent removing its taint) fails the patch and
        # the claim is requeued, but the kubelet's status heartbeats, which bump the Node's
        # resourceVersion every few seconds, no longer make registration a Conflict.
        ops = _label_ops(meta.get("labels"), labels)
        ops += _list_ops("/spec/taints", (node.get("spec") or {}).get("taints"), taints)
        ops += _list_ops("/metadata/ownerReferences", meta.get("ownerReferences"), owners)
        if finalizers is not None:
            ops += _list_ops("/metadata/finalizers", meta.get("finalizers"), finalizers)
        try:
            return await self.kube.json_patch(NODES, codec.name(node), ops, throttle=throttle)
        except errors.Invalid as err:
            # a failed ``test``: a list changed since it was read
            raise errors.Conflict(409, "Conflict", str(err)) from err

    async def _ensure_finalizer(self, node: Obj) -> None:
        """Nodes registered before drain existed get the finalizer too (once)."""
        finalizers = _with_finalizer(node)
        if finalizers is None:
            return
        meta = codec.meta(node)
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        self.state.nodes.upsert(await self.kube.merge_patch(NODES, codec.name(node), patch))

    # ---- initialization ---------------------------------------------------------------------

    async def _initialize(
        self, raw: Obj, claim: NodeClaim, conds: list[Obj], status: dict[str, Any]
    ) -> float | None:
        now = self.clock.now()
        nodes = self.state.node_by_provider_id(claim.provider_id)
        if not nodes:
            codec.set_condition(conds, "Initialized", "Unknown", "NodeNotFound", "", now)
            return None
        node = nodes[0]
        reason, message = _not_initialized(node, claim)
        if reason:
            codec.set_condition(conds, "Initialized", "Unknown", reason, message, now)
            return None
        labels = codec.meta(node).get("labels") or {}
        if labels.get(lbl.INITIALIZED) != "true":
            patched = await self.kube.merge_patch(
                NODES, codec.name(node), {"metadata": {"labels": {lbl.INITIALIZED: "true"}}}
            )
            self.state.nodes.upsert(patched)
        # (the label may have come with registration's write; the condition comes only here)
        self.metrics.nodeclaims_initialized.labels(nodepool=claim.nodepool).inc()
        codec.set_condition(conds, "Initialized", "True", "Initialized", "", now)
        return None

    # ---- writes -----------------------------------------------------------------------------

    def _set_ready(self, conds: list[Obj]) -> None:
        view = {"status": {"conditions": conds}}
        ready = all(
            codec.condition_true(view, c) for c in ("Launched", "Registered", "Initialized")
        )
        codec.set_condition(
            conds,
            "Ready",
            "True" if ready else "Unknown",
            "Ready" if ready else "NotReady",
            "",
            self.clock.now(),
        )

    async def _write_status(self, raw: Obj, conds: list[Obj], status: dict[str, Any]) -> None:
        # Optimistic concurrency, replaying only this pass's own condition changes on a
        # Conflict: a Drifted or Consolidatable written meanwhile by another controller stays.
        change = conditions.replaying(codec.conditions(raw), conds)
        obj = await conditions.update(
            self.kube, NODECLAIMS, codec.name(raw), change, raw=raw, status=status
        )
        if obj is not None:
            self.state.nodeclaims.upsert(obj)

    async def _delete(self, raw: Obj, reason: str, log: Any) -> None:
        log.info("deleting nodeclaim", reason=reason or "node_deleted")
        labels = codec.meta(raw).get("labels") or {}
        if reason:
            self._disrupted(labels, reason)
        try:
            await self.kube.delete(NODECLAIMS, codec.name(raw))
        except errors.NotFound:
            pass

    def _disrupted(self, labels: Mapping[str, str], reason: str) -> None:
        self.metrics.nodeclaims_disrupted.labels(
            reason=reason,
            nodepool=labels.get(lbl.NODEPOOL, ""),
            capacity_type=labels.get(lbl.CAPACITY_TYPE, ""),
            consolidation_policy="",
            termination_mode="graceful",
        ).inc()

    async def _event(self, raw: Obj, kind: str, reason: str, message: str) -> None:
        await self.recorder.publish(codec.object_reference(raw), kind, reason, message)


def _pointer(token: str) -> str:
    """A JSON pointer token (RFC 6901): ``~`` and ``/`` escaped."""
    return token.replace("~", "~0").replace("/", "~1")


def _label_ops(current: Mapping[str, Any] | None, wanted: Mapping[str, str]) -> list[Obj]:
    """Ops setting ``wanted`` labels, one per changed label (others' labels stay as they are)."""
    if not current:
        return [{"op": "add", "path": "/metadata/labels", "value": dict(wanted)}]
    return [
        {"op": "add", "path": f"/metadata/labels/{_pointer(k)}", "value": v}
        for k, v in sorted(wanted.items())
        if current.get(k) != v
    ]


def _list_ops(path: str, current: list[Any] | None, wanted: list[Any]) -> list[Obj]:
    """Ops replacing the list at ``path`` with ``wanted`` if it still is ``current``."""
    if current == wanted or (not current and not wanted):
        return []
    if current is None:
        return [{"op": "add", "path": path, "value": wanted}]
    return [
        {"op": "test", "path": path, "value": current},
        {"op": "replace", "path": path, "value": wanted},
    ]


def _with_finalizer(node: Mapping[str, Any]) -> list[str] | None:
    """The Node's finalizers plus ``karpenter.sh/termination``, which makes deleting the Node
    go through drain (node termination); None when present already or too late to add (the
    apiserver refuses new finalizers on an object being deleted)."""
    meta = codec.meta(node)
    finalizers = list(meta.get("finalizers") or [])
    if lbl.FINALIZER_TERMINATION in finalizers or meta.get("deletionTimestamp"):
        return None
    return [*finalizers, lbl.FINALIZER_TERMINATION]


def _not_initialized(node: Mapping[str, Any], claim: NodeClaim) -> tuple[str, str]:
    """Why the Node is not initialized yet (("", "") when it is)."""
    if not codec.condition_true(node, "Ready"):
        return "NodeNotReady", "Node status is NotReady"
    taints = [
        Taint(str(t.get("key")), str(t.get("effect")), str(t.get("value") or ""))
        for t in codec.taints_of(node)
    ]
    startup = [
        t
        for t in taints
        if any(t.key == s.key and t.effect == s.effect for s in claim.startup_taints)
    ]
    if startup:
        return "StartupTaintsExist", f"StartupTaint {startup[0].describe()} still exists"
    ephemeral = [t for t in taints if is_ephemeral(t)]
    if ephemeral:
        return (
            "KnownEphemeralTaintsExist",
            f"KnownEphemeralTaint {ephemeral[0].describe()} still exists",
        )
    allocatable = res.parse((node.get("status") or {}).get("allocatable") or {})
    for name, value in sorted(claim.requests.items()):
        if name in res.WELL_KNOWN_RESOURCES or value <= 0:
            continue
        if allocatable.get(name, 0) <= 0:
            return "ResourceNotRegistered", f"Resource {name!r} was requested but not registered"
    return "", ""
