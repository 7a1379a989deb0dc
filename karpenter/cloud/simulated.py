"""The simulated cloud: an in-memory provider that "boots" a Node object for each launch.

Like upstream's kwok provider, it lets the whole controller run against a real apiserver with
no machines. ``create`` picks the cheapest available offering the NodeClaim allows from a
catalog (the ``fake`` catalog or explicit types, as ``simulate`` uses), records an instance,
and after ``boot_delay_s`` creates a Node carrying the instance type's capacity, the claim's
labels and taints, the ``karpenter.sh/unregistered`` taint a real kubelet would register with,
a ``Ready`` condition, and providerID ``simulated://<claim name>``. ``delete`` removes the Node
and the instance; afterwards every call reports NodeClaimNotFound, as the port requires.
Offerings can be marked out of capacity to exercise the insufficient-capacity path.

Node creation runs in the provider's own task group (``run``), so a launch call returns as soon
as the instance is recorded, just as a cloud API returns before the machine has booted.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
from karpenter.kube.client import NODES, KubeClient, Obj

PROVIDER_PREFIX = "simulated://"
IMAGE_ID = "simulated-image"
_NODE_CREATE_ATTEMPTS = 5
# kwok adopts Nodes with this annotation (kwok's convention; upstream's kwok provider sets it too)
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# The simulated node agent's annotations (read by kwok's node-agent Stage, sandbox/kwok.py)
AGENT_TAINTS = "simulated.karpenter.sh/agent-removes-taints"
AGENT_DELAY = "simulated.karpenter.sh/agent-delay"
_NODE_ADDRESSES = 1 << 20  # 172.16.0.0/12


@dataclass(frozen=True, slots=True)
class Instance:
    """A "running machine": which claim it serves and what it is."""

    claim_name: str
    provider_id: str
    instance_type: InstanceType
    offering: Offering
    labels: dict[str, str]
    claim: NodeClaim


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
    """An in-memory CloudProvider whose instances are Node objects in the apiserver."""

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
        self.catalog = tuple(catalog)
        self.clock = clock
        self.boot_delay_s = boot_delay_s
        # When the node agent removes the claim's startup taints after the Node is Ready;
        # None leaves them for someone else (a test, a real agent DaemonSet).
        self.startup_agent_delay_s = startup_agent_delay_s
        # False models a cloud whose price list does not know about the shortage yet: the
        # solver picks the offering and only the launch fails.
        self.advertise_unavailable = advertise_unavailable
        self.instances: dict[str, Instance] = {}
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
        self._log = structlog.get_logger().bind(cloud="simulated")

    @property
    def name(self) -> str:
        """Provider name in metrics and logs."""
        return "simulated"

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the task group that boots Nodes; returns only when cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None

    async def _adopt(self) -> None:
        try:
            nodes, _ = await self.kube.list(NODES)
        except (errors.ApiError, OSError) as err:
            self._log.warning("cannot adopt existing instances", error=str(err))
            return
        by_name = {it.name: it for it in self.catalog}
        for node in nodes:
            provider_id = str((node.get("spec") or {}).get("providerID") or "")
            labels = dict(codec.meta(node).get("labels") or {})
            it = by_name.get(labels.get(lbl.INSTANCE_TYPE, ""))
            if not provider_id.startswith(PROVIDER_PREFIX) or it is None:
                continue
            offer = next(
                (
                    o
                    for o in it.offerings
                    if o.zone == labels.get(lbl.ZONE)
                    and o.capacity_type == labels.get(lbl.CAPACITY_TYPE)
                ),
                it.offerings[0],
            )
            name = provider_id.removeprefix(PROVIDER_PREFIX)
            claim = NodeClaim(
                name,
                labels.get(lbl.NODEPOOL, ""),
                labels,
                provider_id=provider_id,
                image_id=IMAGE_ID,
                capacity=dict(it.capacity),
                allocatable=it.allocatable,
                launched=True,
            )
            self.instances[name] = Instance(name, provider_id, it, offer, labels, claim)
        if self.instances:
            self._log.info("adopted instances", count=len(self.instances))

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
        """Launch the cheapest offering the claim allows; the Node follows after the delay."""
        self.create_calls += 1
        for key in (claim.nodepool, ""):
            queued = self._create_errors.get(key)
            if queued:
                raise queued.pop(0)
        existing = self.instances.get(claim.name)
        if existing is not None:  # a retried launch of the same claim is idempotent
            return existing.claim
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
        instance = self._instance(claim, reqs, it, offer)
        self.instances[claim.name] = instance
        if self._tg is None:
            raise RuntimeError("SimulatedCloud.run() is not running")
        self._tg.start_soon(self._boot, instance)
        self._log.info("launched", nodeclaim=claim.name, instance_type=it.name, zone=offer.zone)
        return instance.claim

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

    def _instance(
        self, claim: NodeClaim, reqs: Requirements, it: InstanceType, offer: Offering
    ) -> Instance:
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
        launched = dataclasses.replace(
            claim,
            labels=dict(sorted(labels.items())),
            provider_id=provider_id,
            image_id=IMAGE_ID,
            capacity=dict(it.capacity),
            allocatable=it.allocatable,
            launched=True,
        )
        return Instance(claim.name, provider_id, it, offer, labels, launched)

    async def _boot(self, instance: Instance) -> None:
        await self.clock.sleep(self.boot_delay_s)
        for attempt in range(_NODE_CREATE_ATTEMPTS):
            if instance.claim_name not in self.instances:
                return  # terminated before it booted
            try:
                await self._create_node(instance)
                return
            except errors.AlreadyExists:
                return
            except (errors.ApiError, OSError) as err:
                self._log.warning("node boot failed", node=instance.claim_name, error=str(err))
                await self.clock.sleep(0.5 * (attempt + 1))

    async def _create_node(self, instance: Instance) -> None:
        await self.kube.create(NODES, node_manifest(instance, self.startup_agent_delay_s))

    async def delete(self, claim: NodeClaim) -> None:
        """Terminate: the Node goes away; NodeClaimNotFound once the instance is gone."""
        instance = self._find(claim)
        if instance is None:
            raise NodeClaimNotFoundError(f"instance for {claim.name} not found")
        del self.instances[instance.claim_name]
        try:
            await self.kube.delete(NODES, instance.claim_name)
        except errors.NotFound:
            pass

    def _find(self, claim: NodeClaim) -> Instance | None:
        if claim.provider_id:
            for instance in self.instances.values():
                if instance.provider_id == claim.provider_id:
                    return instance
        return self.instances.get(claim.name)

    async def get(self, provider_id: str) -> NodeClaim:
        """The instance with this provider id."""
        for instance in self.instances.values():
            if instance.provider_id == provider_id:
                return instance.claim
        raise NodeClaimNotFoundError(f"no instance {provider_id}")

    async def list(self) -> list[NodeClaim]:
        """Every running instance."""
        return [i.claim for _, i in sorted(self.instances.items())]

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """``repair`` (tests shorten the tolerations)."""
        return self.repair

    async def is_drifted(self, claim: NodeClaim) -> str:
        """What ``drifted`` says for the claim ("" unless a test marked it)."""
        return self.drifted.get(claim.name, "")


def node_manifest(instance: Instance, agent_delay_s: float | None) -> Obj:
    """The Node a booted instance registers: labels, taints (with ``karpenter.sh/unregistered``
    as a kubelet registers), and its status — capacity, allocatable, an address, node info —
    in the same create call (the apiserver keeps a Node's status on create), so kwok, which
    turns it Ready, never sees it without capacity and never fills in its own defaults."""
    claim = instance.claim
    taints = codec.merge_taints(
        [{"key": lbl.TAINT_UNREGISTERED, "effect": "NoExecute"}],
        [codec.taint(t) for t in (*claim.taints, *claim.startup_taints)],
    )
    annotations = {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1]}
    if claim.startup_taints and agent_delay_s is not None:
        annotations[AGENT_TAINTS] = ",".join(sorted({t.key for t in claim.startup_taints}))
        annotations[AGENT_DELAY] = f"{agent_delay_s:g}s"
    offset = zlib.crc32(instance.claim_name.encode()) % _NODE_ADDRESSES
    address = str(ipaddress.IPv4Address("172.16.0.0") + offset)
    labels = instance.labels
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": instance.claim_name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": instance.provider_id, "taints": taints},
        "status": {
            "capacity": codec.resource_list(instance.instance_type.capacity),
            "allocatable": codec.resource_list(instance.instance_type.allocatable),
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": instance.claim_name},
            ],
            "nodeInfo": {
                "architecture": labels.get(lbl.ARCH, "amd64"),
                "operatingSystem": labels.get(lbl.OS, "linux"),
                "kubeletVersion": "simulated",
            },
            "phase": "Pending",
        },
    }
