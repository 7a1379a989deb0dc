"""The simulated cloud: a provider whose instances are records in the cluster and whose
machines are Node objects that kwok brings to life.

Like upstream's kwok provider, it lets the whole controller run against a real apiserver with
no machines. ``create`` picks the cheapest available offering the NodeClaim allows from a
catalog (the ``fake`` catalog or explicit types, as ``simulate`` uses) and stores an instance
record (``instances``: one ConfigMap per instance); ``boot_delay_s`` later the
instance registers its Node — created with its status in the same call (capacity,
allocatable, an address, node info; the apiserver keeps a Node's status on create), the
claim's labels and taints, the ``karpenter.sh/unregistered`` taint a kubelet registers with,
kwok's annotation so kwok adopts it and turns it Ready, the ``karpenter.sh/do-not-sync-taints``
label (it registers with its taints, as the AWS provider's kubelets do), and providerID
``simulated://<claim name>``. The claim's startup taints are listed for the node agent (a kwok
Stage), which removes them ``startup_agent_delay_s`` after the Node is Ready, as a CNI agent
would. ``delete`` removes the record, then the Node; afterwards every call reports
NodeClaimNotFound, as the port requires. Offerings can be marked out of capacity.

Restart safety: nothing lives only in this process. ``run`` (re)loads the records: instances
not booted yet boot when due, Nodes whose record is gone (terminated instances) are deleted as
a cloud's node lifecycle controller would, and records no NodeClaim owns for a minute (a launch
whose claim was deleted mid-flight) are terminated. Booting runs in ``run``'s task group, so a
launch returns as soon as the record is stored, as a cloud API returns before the machine boots.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import zlib
from collections.abc import Iterable, Sequence

import anyio
import anyio.abc
import structlog

from karpenter.aio.clock import Clock
from karpenter.cloud.provider import (
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    OfferingRef,
)
from karpenter.core.model import labels as lbl
from karpenter.core.model.instancetype import InstanceType, Offering
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.repair import RepairPolicy
from karpenter.core.scheduling.requirements import (
    Requirement,
    RequirementError,
    Requirements,
    from_selector_terms,
)
from karpenter.kube import codec, errors
from karpenter.kube.client import NODECLAIMS, NODES, KubeClient, Obj
from karpenter.providers.simulated.instances import Record, Records

PROVIDER_PREFIX = "simulated://"
_NODE_CREATE_ATTEMPTS = 5
_NODE_ADDRESSES = 1 << 20  # 172.16.0.0/12
RECONCILE_S = 15.0  # how often records, Nodes and NodeClaims are compared
LEAK_GRACE_S = 60.0  # a record no NodeClaim owns for this long is a leaked launch
# A Node whose instance is gone is deleted after this long, as a cloud's node lifecycle
# controller does once the machine stops answering (it is seen here at one sweep, then gone).
ORPHAN_NODE_GRACE_S = 120.0


def _allows(reqs: Requirements, key: str, value: str) -> bool:
    req = reqs.get(key)
    return req is None or req.has(value)


def _offerings(it: InstanceType, reqs: Requirements) -> list[Offering]:
    return [
        o
        for o in it.offerings
        if o.available
        and _allows(reqs, lbl.ZONE, o.zone)
        and _allows(reqs, lbl.CAPACITY_TYPE, o.capacity_type)
    ]


class SimulatedCloud:
    """A CloudProvider whose instances are records and Node objects in the apiserver."""

    def __init__(
        self,
        kube: KubeClient,
        catalog: Sequence[InstanceType],
        clock: Clock,
        *,
        boot_delay_s: float = 0.0,
        advertise_unavailable: bool = True,
        startup_agent_delay_s: float | None = 1.0,
    ) -> None:
        self.kube = kube
        self.records = Records(kube)
        self.catalog = tuple(catalog)
        self.clock = clock
        self.boot_delay_s = boot_delay_s
        # When the node agent removes the claim's startup taints after the Node is Ready;
        # None leaves them for someone else (a test, a real agent DaemonSet).
        self.startup_agent_delay_s = startup_agent_delay_s
        # False models a cloud whose price list does not know about the shortage yet: the
        # solver picks the offering and only the launch fails.
        self.advertise_unavailable = advertise_unavailable
        # NodeClaim name → drift reason the provider reports (tests, chaos experiments)
        self.drifted: dict[str, str] = {}
        # as upstream's kwok provider: a node NotReady (or unknown) for 10 minutes is replaced
        self.repair: tuple[RepairPolicy, ...] = (
            RepairPolicy("Ready", "False", 600.0),
            RepairPolicy("Ready", "Unknown", 600.0),
        )
        self.unavailable: set[OfferingRef] = set()
        self.create_calls = 0
        self._create_errors: dict[str, list[Exception]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._booting: set[str] = set()
        self._orphaned: dict[str, float] = {}  # Node name → when first seen without a record
        self._log = structlog.get_logger().bind(cloud="simulated")

    @property
    def name(self) -> str:
        """Provider name in metrics and logs."""
        return "simulated"

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the task group that boots Nodes, and keep records, Nodes and NodeClaims in
        step (see the module docstring); returns only when cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await self.records.ensure_namespace()
                await self._reconcile_quietly()
                task_status.started()
                while True:
                    await self.clock.sleep(RECONCILE_S)
                    await self._reconcile_quietly()
            finally:
                self._tg = None

    async def _reconcile_quietly(self) -> None:
        try:
            await self.reconcile()
        except (errors.ApiError, OSError) as err:
            self._log.warning("instance reconciliation failed", error=str(err))

    async def reconcile(self) -> None:
        """Boot what is due, delete Nodes of terminated instances, terminate leaked ones."""
        # Nodes before records: a Node listed first had its record before it, so a record
        # missing from the later list was deleted, never not-yet-written.
        nodes, _ = await self.kube.list(NODES)
        records = await self.records.list()
        # Records before NodeClaims, for the same reason: a claim precedes its record.
        claims, _ = await self.kube.list(NODECLAIMS)
        booted = {codec.name(n) for n in nodes if _simulated(n)}
        await self._delete_orphans(booted - {r.name for r in records})
        owned = {codec.name(c) for c in claims}
        now = self.clock.now()
        for record in records:
            if record.name not in owned and now - record.launched_at >= LEAK_GRACE_S:
                self._log.info("terminating leaked instance", instance=record.name)
                await self._terminate(record.name)
            elif record.name not in booted:
                self._boot_soon(record)

    async def _delete_orphans(self, orphans: set[str]) -> None:
        now = self.clock.now()
        self._orphaned = {n: self._orphaned.get(n, now) for n in orphans}
        for name, since in sorted(self._orphaned.items()):
            if now - since >= ORPHAN_NODE_GRACE_S:
                self._log.info("deleting the node of a terminated instance", node=name)
                await self._delete_node(name)

    def _boot_soon(self, record: Record) -> None:
        if self._tg is None or record.name in self._booting:
            return
        self._booting.add(record.name)
        self._tg.start_soon(self._boot, record)

    def inject_create_errors(self, *errs: Exception, nodepool: str = "") -> None:
        """The next ``len(errs)`` launches (of ``nodepool``'s claims, or of any claim when it
        is empty) fail with these errors, in order, one-shot each."""
        self._create_errors.setdefault(nodepool, []).extend(errs)

    def reset(self) -> None:
        """Forget injected errors and unavailable offerings (instances are kept)."""
        self._create_errors.clear()
        self.unavailable.clear()

    def mark_unavailable(self, refs: Iterable[OfferingRef]) -> None:
        """Make offerings fail with insufficient capacity (tests, chaos experiments)."""
        self.unavailable.update(refs)

    # ---- the port ---------------------------------------------------------------------------

    async def instance_types(self, nodepool: NodePool) -> tuple[InstanceType, ...]:
        """Every type of the catalog, with offerings marked unavailable switched off."""
        if not self.unavailable or not self.advertise_unavailable:
            return self.catalog
        return tuple(self._with_availability(it) for it in self.catalog)

    def _with_availability(self, it: InstanceType) -> InstanceType:
        offers = tuple(
            dataclasses.replace(o, available=False)
            if OfferingRef(it.name, o.zone, o.capacity_type) in self.unavailable
            else o
            for o in it.offerings
        )
        return dataclasses.replace(it, offerings=offers)

    async def create(self, claim: NodeClaim) -> NodeClaim:
        """Launch the cheapest offering the claim allows; the Node follows after the delay.

        Idempotent per claim: a retried launch (a restart after the record was stored but
        before the claim said so) returns the instance already launched for it."""
        self.create_calls += 1
        for key in (claim.nodepool, ""):
            queued = self._create_errors.get(key)
            if queued:
                raise queued.pop(0)
        existing = await self.records.get(claim.name)
        if existing is not None:
            return existing.claim()
        try:
            reqs = from_selector_terms(claim.requirements)
        except RequirementError as err:
            raise InsufficientCapacityError(f"invalid requirements: {err}") from err
        it, offer, refused = self._choose(claim, reqs)
        if it is None or offer is None:
            raise InsufficientCapacityError(
                "no instance type with an available offering satisfies the NodeClaim",
                tuple(refused),
            )
        record = await self.records.create(self._record(claim, reqs, it, offer))
        self._boot_soon(record)
        self._log.info("launched", nodeclaim=claim.name, instance_type=it.name, zone=offer.zone)
        return record.claim()

    def _choose(
        self, claim: NodeClaim, reqs: Requirements
    ) -> tuple[InstanceType | None, Offering | None, list[OfferingRef]]:
        best: tuple[float, int, InstanceType, Offering] | None = None
        refused: list[OfferingRef] = []
        for index, it in enumerate(self.catalog):
            if not _allows(reqs, lbl.INSTANCE_TYPE, it.name) or reqs.conflicts(it.requirements):
                continue
            if any(v > it.allocatable.get(k, 0) for k, v in claim.requests.items() if v > 0):
                continue
            for offer in _offerings(it, reqs):
                ref = OfferingRef(it.name, offer.zone, offer.capacity_type)
                if ref in self.unavailable:
                    refused.append(ref)
                    continue
                if best is None or (offer.price, index) < (best[0], best[1]):
                    best = (offer.price, index, it, offer)
        if best is None:
            return None, None, refused
        return best[2], best[3], refused

    def _record(
        self, claim: NodeClaim, reqs: Requirements, it: InstanceType, offer: Offering
    ) -> Record:
        narrowed = reqs.intersect(
            Requirements(
                (
                    Requirement(lbl.INSTANCE_TYPE, False, frozenset({it.name})),
                    Requirement(lbl.ZONE, False, frozenset({offer.zone})),
                    Requirement(lbl.CAPACITY_TYPE, False, frozenset({offer.capacity_type})),
                )
            )
        )
        labels = dict(it.requirements.single_values())
        labels.update(narrowed.single_values())
        # a real machine has one OS and architecture even when the type allows several
        for key, preferred in ((lbl.OS, "linux"), (lbl.ARCH, "amd64")):
            req = narrowed.get(key) or it.requirements.get(key)
            if key not in labels and req is not None:
                labels[key] = preferred if req.has(preferred) else req.any_value()
        labels.update(claim.labels)
        labels[lbl.HOSTNAME] = claim.name
        provider_id = f"{PROVIDER_PREFIX}{claim.name}"
        node = node_manifest(
            claim, provider_id, dict(sorted(labels.items())), it, self.startup_agent_delay_s
        )
        now = self.clock.now()
        return Record(claim.name, provider_id, node, now, now + self.boot_delay_s)

    async def _boot(self, record: Record) -> None:
        try:
            await self.clock.sleep(record.boot_at - self.clock.now())
            for attempt in range(_NODE_CREATE_ATTEMPTS):
                try:
                    if await self.records.get(record.name) is None:
                        return  # terminated before it booted
                    await self.kube.create(NODES, record.node)
                    return
                except errors.AlreadyExists:
                    return
                except (errors.ApiError, OSError) as err:
                    self._log.warning("node boot failed", node=record.name, error=str(err))
                    await self.clock.sleep(0.5 * (attempt + 1))
        finally:
            self._booting.discard(record.name)

    async def delete(self, claim: NodeClaim) -> None:
        """Terminate: the record, then the Node; NodeClaimNotFound once the instance is gone."""
        name = _instance_name(claim.provider_id) or claim.name
        if not await self._terminate(name):
            raise NodeClaimNotFoundError(f"instance for {claim.name} not found")

    async def _terminate(self, name: str) -> bool:
        removed = await self.records.delete(name)
        # a crash between the two leaves a Node without record, which ``reconcile`` deletes
        await self._delete_node(name)
        return removed

    async def _delete_node(self, name: str) -> None:
        try:
            await self.kube.delete(NODES, name)
        except errors.NotFound:
            pass

    async def get(self, provider_id: str) -> NodeClaim:
        """The instance with this provider id."""
        name = _instance_name(provider_id)
        record = await self.records.get(name) if name else None
        if record is None or record.provider_id != provider_id:
            raise NodeClaimNotFoundError(f"no instance {provider_id}")
        return record.claim()

    async def list(self) -> list[NodeClaim]:
        """Every running (or booting) instance."""
        return [r.claim() for r in await self.records.list()]

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """``repair`` (tests shorten the tolerations)."""
        return self.repair

    async def is_drifted(self, claim: NodeClaim) -> str:
        """What ``drifted`` says for the claim ("" unless a test marked it)."""
        return self.drifted.get(claim.name, "")


def _instance_name(provider_id: str) -> str:
    return (
        provider_id.removeprefix(PROVIDER_PREFIX) if provider_id.startswith(PROVIDER_PREFIX) else ""
    )


def _simulated(node: Obj) -> bool:
    return str((node.get("spec") or {}).get("providerID") or "").startswith(PROVIDER_PREFIX)


def node_manifest(
    claim: NodeClaim,
    provider_id: str,
    labels: dict[str, str],
    it: InstanceType,
    agent_delay_s: float | None,
) -> Obj:
    """The Node a booted instance registers: labels, taints (with ``karpenter.sh/unregistered``
    as a kubelet registers), and its status — capacity, allocatable, an address, node info —
    in the same create call (the apiserver keeps a Node's status on create), so kwok, which
    turns it Ready, never sees it without capacity and never fills in its own defaults."""
    taints = codec.merge_taints(
        [{"key": lbl.TAINT_UNREGISTERED, "effect": "NoExecute"}],
        [codec.taint(t) for t in (*claim.taints, *claim.startup_taints)],
    )
    # registered with every taint, as a kubelet's --register-with-taints: Karpenter must not
    # merge them again at registration, which would put back a startup taint the node agent
    # already removed when registration came late (a controller restart; upstream #1772)
    labels = {**labels, lbl.DO_NOT_SYNC_TAINTS: "true"}
    # kwok's convention (upstream's kwok provider sets it too): kwok adopts the Node
    annotations = {lbl.KWOK_NODE[0]: lbl.KWOK_NODE[1]}
    if claim.startup_taints and agent_delay_s is not None:
        annotations[lbl.AGENT_TAINTS] = ",".join(sorted({t.key for t in claim.startup_taints}))
        annotations[lbl.AGENT_DELAY] = f"{agent_delay_s:g}s"
    offset = zlib.crc32(claim.name.encode()) % _NODE_ADDRESSES
    address = str(ipaddress.IPv4Address("172.16.0.0") + offset)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": claim.name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": provider_id, "taints": taints},
        "status": {
            "capacity": codec.resource_list(it.capacity),
            "allocatable": codec.resource_list(it.allocatable),
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": claim.name},
            ],
            "nodeInfo": {
                "architecture": labels.get(lbl.ARCH, "amd64"),
                "operatingSystem": labels.get(lbl.OS, "linux"),
                "kubeletVersion": "simulated",
            },
            "phase": "Pending",
        },
    }
