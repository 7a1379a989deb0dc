"""AWSCloudProvider: the CloudProvider port on EC2.

Create resolves the claim's EC2NodeClass, builds the catalogue (capacity, overhead, prices,
ICE memory, reserved offerings of its capacity reservations), plans the fleet
(``aws/core/launch.py``), ensures one launch template per (AMI, max pods, reservation) group
and calls CreateFleet. Pools that answer with insufficient capacity are hidden for 3 minutes
and the launch is planned again without them, up to ``max_launch_attempts`` fleets; only then
does the claim fail with InsufficientCapacity. A reservation that answers so is marked full in
the availability ledger instead; a launch into one takes a slot, a deleted instance gives it
back. Launches
into the NodeClass's placement group remember their ICE under the group (and the pinned
partition), see ``aws/core/placement.py``. Zones under an ARC zonal shift offer nothing and
their instances are not terminated (``aws/core/zonalshift.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from karpenter.cloud.provider import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    OfferingRef,
)
from karpenter.core.model import labels as lbl
from karpenter.core.model.instancetype import InstanceType
from karpenter.core.model.node import NodeClaim
from karpenter.core.model.nodepool import NodePool
from karpenter.core.scheduling.requirements import from_selector_terms
from karpenter.providers.aws.api import kubeletcel
from karpenter.providers.aws.cloud import (
    errors,
    fleet,
    instances,
    launchtemplates,
    nodeclass_catalog,
    templates,
)
from karpenter.providers.aws.cloud.clients import Clients
from karpenter.providers.aws.cloud.ec2data import RegionTypes
from karpenter.providers.aws.cloud.repair import REPAIR_POLICIES, RepairPolicy
from karpenter.providers.aws.core import (
    amis,
    catalog,
    discovered,
    drift,
    kubeletexpr,
    kubeletvalidation,
    launch,
    placement,
    tags,
)
from karpenter.providers.aws.core import labels as awslbl
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.core.capacity import Kubelet
from karpenter.providers.aws.core.discovered import DiscoveredCapacity
from karpenter.providers.aws.core.pricing import PriceTable
from karpenter.providers.aws.core.subnets import InflightIPs
from karpenter.providers.aws.core.unavailable import UnavailableOfferings
from karpenter.providers.aws.core.zonalshift import ZonalShifts
from karpenter.providers.aws.settings import AWSSettings


class NodeClassSource(Protocol):
    """Where the provider reads EC2NodeClasses (the kube informer, or a dict in tests)."""

    async def get(self, name: str) -> nc.EC2NodeClass | None:
        """The NodeClass by name, or None."""
        ...


class AWSCloudProvider:
    """The CloudProvider port for AWS."""

    def __init__(
        self,
        clients: Clients,
        settings: AWSSettings,
        nodeclasses: NodeClassSource,
        region: RegionTypes,
        prices: PriceTable,
        now: Callable[[], float],
        cluster_dns: str = "",
        cluster_cidr: str = "",
        max_launch_attempts: int = 3,
    ) -> None:
        self.clients = clients
        self.settings = settings
        self.nodeclasses = nodeclasses
        self._region = region
        self._prices = prices
        self._data_version = 0  # bumps when prices or instance types are replaced
        self.now = now
        self.cluster_dns = cluster_dns
        self.cluster_cidr = cluster_cidr
        self.max_launch_attempts = max_launch_attempts
        self.min_values_best_effort = False  # MIN_VALUES_POLICY=BestEffort (core settings)
        self.eks_version = ""  # set when EKS_CONTROL_PLANE says to trust EKS for the version
        self.unavailable = UnavailableOfferings()
        # told of every pool a launch found without capacity (logs and metrics, attach())
        self.on_unavailable: Callable[[str, str, str, str], None] = _ignore_unavailable
        self.reservation_availability = rsv.Availability()  # synced by NodeClass discovery
        self.exhausted_subnets: dict[str, float] = {}  # subnet id → until
        self.discovered = DiscoveredCapacity()
        self.inflight_ips = InflightIPs()
        self.instances = instances.Instances(clients.ec2, settings.CLUSTER_NAME)
        self.fleets = fleet.Fleets(clients.ec2)
        self.launch_templates = launchtemplates.LaunchTemplates(clients.ec2, settings.CLUSTER_NAME)
        self._catalogs: dict[tuple[object, ...], tuple[InstanceType, ...]] = {}
        self.zonal_shifts = ZonalShifts()  # polled by providers/aws/controllers/zonalshift.py
        self.cluster_arn = ""  # from EKS DescribeCluster (ARC knows the cluster by it)
        # NodeClassCEL: kubelet expressions are evaluated; off, they only fail validation
        self.kubelet_cel = (
            kubeletcel.Engine() if settings.aws_feature_gates["NodeClassCEL"] else None
        )

    @property
    def region(self) -> RegionTypes:
        """The region's instance types and zones (replaced by the 12-hourly refresh)."""
        return self._region

    @region.setter
    def region(self, value: RegionTypes) -> None:
        self._region = value
        self._data_version += 1

    @property
    def prices(self) -> PriceTable:
        """The current price table (replaced by the 12-hourly refresh)."""
        return self._prices

    @prices.setter
    def prices(self, value: PriceTable) -> None:
        self._prices = value
        self._data_version += 1

    @property
    def name(self) -> str:
        """``aws``."""
        return "aws"

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """When node repair may replace an unhealthy node (NodeRepair feature gate)."""
        return REPAIR_POLICIES

    # --- catalogue ---------------------------------------------------------------------------

    def catalog(self, node_class: nc.EC2NodeClass) -> tuple[InstanceType, ...]:
        """The NodeClass's instance types now (memoized until status, prices or ICE change)."""
        self.reservation_availability.expire(self.now())
        # specs hold dicts (unhashable): their repr is a cheap, exact key
        key = (
            node_class.name,
            repr(node_class.spec),
            repr(node_class.status),
            self._data_version,
            self.unavailable.active(self.now()),
            tuple(sorted(self.discovered.for_amis(self._amis_key(node_class), self.now()).items())),
            self.zonal_shifts.shifted(self.now()),
            self.reservation_availability.seq,
        )
        found = self._catalogs.get(key)
        if found is None:
            inp = nodeclass_catalog.catalog_input(
                self.settings,
                node_class,
                self.region,
                self.prices,
                self.discovered.for_amis(self._amis_key(node_class), self.now()),
                self.zonal_shifts.shifted(self.now()),
                self.reservation_availability.counts,
                self.kubelet_cel.evaluate if self.kubelet_cel else None,
            )
            found = catalog.build(self.region.infos, inp, self.unavailable, self.now())
            self._catalogs = {key: found}  # one NodeClass at a time is the common case
        return found

    @staticmethod
    def _amis_key(node_class: nc.EC2NodeClass) -> str:
        return discovered.amis_key(a.id for a in node_class.status.amis)

    def observe_node(
        self, node_class: nc.EC2NodeClass, instance_type: str, image_id: str, memory_milli: int
    ) -> None:
        """A Node registered: remember its real memory if it runs a currently selected AMI."""
        if any(a.id == image_id for a in node_class.status.amis):
            self.discovered.observe(
                instance_type, self._amis_key(node_class), memory_milli, self.now()
            )

    async def instance_types(self, nodepool: NodePool) -> tuple[InstanceType, ...]:
        """The types of the NodePool's EC2NodeClass (none when it is missing)."""
        node_class = await self.nodeclasses.get(nodepool.template.node_class_ref.name)
        if node_class is None or node_class.deleting:
            return ()
        return self.catalog(node_class)

    # --- create ------------------------------------------------------------------------------

    async def _node_class(self, claim: NodeClaim) -> nc.EC2NodeClass:
        node_class = await self.nodeclasses.get(claim.node_class_ref.name)
        if node_class is None or node_class.deleting:
            raise InsufficientCapacityError(
                f"failed resolving NodeClass {claim.node_class_ref.name!r}"
            )
        if node_class.status.ready() != "True":
            cond = node_class.status.condition(nc.COND_READY)
            why = cond.message if cond else "Unknown"
            raise NodeClassNotReadyError(f"EC2NodeClass {node_class.name} is not ready: {why}")
        return node_class

    @staticmethod
    def _placement(
        claim: NodeClaim, node_class: nc.EC2NodeClass
    ) -> tuple[nc.PlacementGroup | None, int | None]:
        """The NodeClass's placement group and the partition the claim pins (if any)."""
        group = node_class.status.placement_group()
        reqs = from_selector_terms(claim.requirements)
        return group, placement.pinned_partition(group, reqs)

    async def create(self, claim: NodeClaim) -> NodeClaim:
        """Launch one instance for the claim (see the module docstring for ICE fallback)."""
        node_class = await self._node_class(claim)
        self._forget_expired(self.now())
        group, partition = self._placement(claim, node_class)
        scope = placement.ice_scope(group, partition)
        tried: list[OfferingRef] = []
        for _ in range(self.max_launch_attempts):
            now = self.now()
            types = self.catalog(node_class)
            if partition is not None:
                types = placement.hide_partition_ice(types, self.unavailable, scope, now)
            subnets = self.inflight_ips.adjust(
                s for s in node_class.status.subnets if self.exhausted_subnets.get(s.id, 0) <= now
            )
            try:
                plan = launch.plan(
                    claim,
                    types,
                    subnets,
                    node_class.status.amis,
                    self.min_values_best_effort,
                    rsv.types_by_id(node_class.status.capacity_reservations),
                )
            except launch.NoCapacityError as err:
                raise InsufficientCapacityError(str(err), tuple(tried)) from None
            result = await self._fleet_retrying(claim, node_class, plan, types, now)
            tried.extend(self._record(result.errors, plan, now, scope))
            self._spread_full(result.errors, plan.capacity_type, types, group, now)
            if result.instance is not None:
                groups = frozenset(g.id for g in node_class.status.security_groups)
                instance = instances.from_fleet(result.instance, groups, now)
                instance = self._reserved(instance, plan)
                pods = next(
                    (t.capacity.get("pods", 0) for t in types if t.name == instance.instance_type),
                    0,
                )
                self.inflight_ips.consume(instance.subnet_id, pods // 1000 + 1)
                if partition is None and group and group.strategy == placement.PARTITION:
                    partition = await self._assigned_partition(instance.id)
                return self._launched(claim, node_class, instance, types, partition)
            if any(e.code not in errors.CAPACITY for e in result.errors):
                text = "; ".join(sorted({f"{e.code}: {e.message}" for e in result.errors}))
                raise CreateError(text, errors.launch_reason(text))
        raise InsufficientCapacityError(
            "all requested instance types were unavailable during launch", tuple(tried)
        )

    async def _assigned_partition(self, instance_id: str) -> int | None:
        """The partition EC2 picked for an instance launched without one.

        Upstream holds registration until DescribeInstances shows it; here one describe right
        after the launch reads it, and ``aws/controllers/partition.py`` labels the claims
        whose partition EC2 did not show yet.
        """
        try:
            return (await self.instances.get(instance_id)).partition
        except NodeClaimNotFoundError:
            return None

    async def assigned_partition(self, claim: NodeClaim) -> int | None:
        """The partition of a claim's instance when its NodeClass uses a partition group."""
        node_class = await self.nodeclasses.get(claim.node_class_ref.name)
        group = node_class.status.placement_group() if node_class is not None else None
        instance_id = tags.instance_id(claim.provider_id)
        if group is None or group.strategy != placement.PARTITION or not instance_id:
            return None
        return await self._assigned_partition(instance_id)

    async def _fleet_retrying(
        self,
        claim: NodeClaim,
        node_class: nc.EC2NodeClass,
        plan: launch.Plan,
        types: Sequence[InstanceType],
        now: float,
    ) -> fleet.FleetResult:
        """CreateFleet; a template deleted behind our back is recreated and tried once more."""
        try:
            return await self._fleet(claim, node_class, plan, types, now)
        except Exception as err:
            if errors.code(err) != errors.LAUNCH_TEMPLATE_NOT_FOUND:
                raise
            for name in self.launch_templates.cached:
                self.launch_templates.invalidate(name)
            return await self._fleet(claim, node_class, plan, types, now)

    def _forget_expired(self, now: float) -> None:
        # upstream sweeps its ICE cache every 10s; sweeping on each launch bounds it as well
        self.unavailable.cleanup(now)
        for subnet in [k for k, until in self.exhausted_subnets.items() if until <= now]:
            del self.exhausted_subnets[subnet]

    def _reserved(self, inst: instances.Instance, plan: launch.Plan) -> instances.Instance:
        """A launch into a reservation: which one (its override's), and one slot fewer there."""
        rid = plan.reservation_of(inst.instance_type, inst.zone)
        if not rid:
            return inst
        self.reservation_availability.consume(rid)
        return replace(inst, capacity_type=lbl.CAPACITY_TYPE_RESERVED, reservation_id=rid)

    def _record(
        self,
        errs: Sequence[fleet.FleetError],
        plan: launch.Plan,
        now: float,
        scope: str = "",
    ) -> list[OfferingRef]:
        """Remember failed pools; ICE inside a placement group only counts for that group,
        and a full reservation only for that reservation."""
        capacity_type = plan.capacity_type
        refs = []
        for err in errs:
            rid = plan.reservation_of(err.instance_type, err.zone)
            if rid and err.code in errors.CAPACITY:
                # a full reservation is not a pool shortage: only that reservation is out
                self.reservation_availability.exhaust(rid, now)
                refs.append(OfferingRef(err.instance_type, err.zone, capacity_type))
            elif err.code == errors.SPOT_SLR:
                self.unavailable.mark_capacity_type("spot", now)
            elif err.code == errors.SUBNET_FULL and err.subnet_id:
                # the subnet, not the pool, is out: other subnets of the zone may still launch
                self.exhausted_subnets[err.subnet_id] = now + self.unavailable.ttl
            elif err.code in errors.UNFULFILLABLE and err.instance_type:
                self.unavailable.mark(capacity_type, err.instance_type, err.zone, now, scope)
                self.on_unavailable(err.code, err.instance_type, err.zone, capacity_type)
                # The pools named in InsufficientCapacityError are hidden for every NodePool
                # by the provisioner; a pool that is full inside a placement group is not.
                if not scope:
                    refs.append(OfferingRef(err.instance_type, err.zone, capacity_type))
        return refs

    def _spread_full(
        self,
        errs: Sequence[fleet.FleetError],
        capacity_type: str,
        types: Sequence[InstanceType],
        group: nc.PlacementGroup | None,
        now: float,
    ) -> None:
        """A spread group full in a zone: every type in that zone is out, for this group."""
        if group is None:
            return
        for zone in sorted({e.zone for e in errs if errors.is_spread_limit(e.code, e.message)}):
            for it in types:
                self.unavailable.mark(capacity_type, it.name, zone, now, group.id)

    async def _fleet(
        self,
        claim: NodeClaim,
        node_class: nc.EC2NodeClass,
        plan: launch.Plan,
        types: Sequence[InstanceType],
        now: float,
    ) -> fleet.FleetResult:
        pods = {it.name: it.capacity.get("pods", 0) // 1000 for it in types}
        kubelets = self._resolved_kubelets(node_class, {o.instance_type for o in plan.overrides})
        groups: dict[tuple[str, int, str, str], list[launch.Override]] = {}
        for o in plan.overrides:
            # a reserved override needs a template targeting its own reservation; types whose
            # kubelet expressions resolve differently need their own user data
            k = kubelets.get(o.instance_type)
            key = (o.image_id, pods[o.instance_type], o.reservation_id, repr(k))
            groups.setdefault(key, []).append(o)
        base_tags = tags.instance_tags(
            node_class.spec.tags, self.settings.CLUSTER_NAME, claim.nodepool, node_class.name
        )
        named = []
        where = placement.launch_placement(*self._placement(claim, node_class))
        for (image_id, max_pods, rid, _), overrides in groups.items():
            kind = plan.reservation_type if rid else ""
            kubelet = kubelets.get(overrides[0].instance_type)
            content = templates.content(
                self._cluster(),
                claim,
                node_class,
                templates.Launch(
                    image_id, max_pods, plan.capacity_type, base_tags, where, rid, kind, kubelet
                ),
            )
            named.append((await self.launch_templates.ensure(content, now), overrides))
        req = fleet.request(plan.fleet_capacity_type, named, base_tags, node_class.spec.context)
        return await self.fleets.create(req)

    def kubelet_verdict(self, node_class: nc.EC2NodeClass) -> tuple[str, str] | None:
        """``spec.kubelet``'s ValidationSucceeded verdict against the region's types."""
        engine = self.kubelet_cel
        opts = nodeclass_catalog.capacity_options(
            self.settings,
            node_class,
            self.region.vpc_limits,
            engine.evaluate if engine else None,
        )
        return kubeletvalidation.verdict(
            node_class,
            engine is not None,
            engine.compile_error if engine else lambda _: "",
            self.region.infos,
            opts,
        )

    def _resolved_kubelets(
        self, node_class: nc.EC2NodeClass, names: set[str]
    ) -> dict[str, Kubelet]:
        """Per instance type, the class's kubelet with its CEL expressions resolved (empty
        without expressions or with the gate off)."""
        if self.kubelet_cel is None or not kubeletexpr.has_expressions(node_class.spec.kubelet):
            return {}
        opts = nodeclass_catalog.capacity_options(
            self.settings, node_class, self.region.vpc_limits, self.kubelet_cel.evaluate
        )
        infos = {i.name: i for i in self.region.infos if i.name in names}
        # the catalogue dropped types whose expressions fail, so these resolve
        return {n: kubeletexpr.for_type(opts, i).kubelet for n, i in sorted(infos.items())}

    def _cluster(self) -> templates.Cluster:
        s = self.settings
        return templates.Cluster(
            s.CLUSTER_NAME,
            s.CLUSTER_ENDPOINT,
            s.CLUSTER_CA_BUNDLE,
            self.cluster_cidr,
            self.cluster_dns,
        )

    def _launched(
        self,
        claim: NodeClaim,
        node_class: nc.EC2NodeClass,
        inst: instances.Instance,
        types: Sequence[InstanceType],
        partition: int | None = None,
    ) -> NodeClaim:
        it = next((t for t in types if t.name == inst.instance_type), None)
        labels = dict(claim.labels)
        if it is not None:
            labels.update(it.requirements.single_values())  # placement-group-id among them
        if partition is not None:
            labels[placement.LABEL_PARTITION] = str(partition)
        labels = rsv.node_labels(
            labels, inst.reservation_id, node_class.status.capacity_reservations
        )
        labels.update(
            {
                lbl.INSTANCE_TYPE: inst.instance_type,
                lbl.ZONE: inst.zone,
                lbl.CAPACITY_TYPE: inst.capacity_type,
                lbl.NODEPOOL: claim.nodepool,
            }
        )
        zone_id = self.region.zone_ids.get(inst.zone)
        if zone_id:
            labels[awslbl.ZONE_ID] = zone_id
        annotations = {
            **claim.annotations,
            awslbl.ANNOTATION_NODECLASS_HASH: nc.static_hash(
                node_class, self.settings.CLUSTER_CA_BUNDLE
            ),
            awslbl.ANNOTATION_NODECLASS_HASH_VERSION: awslbl.NODECLASS_HASH_VERSION,
            awslbl.ANNOTATION_INSTANCE_PROFILE: node_class.status.instance_profile,
        }
        return replace(
            claim,
            labels=labels,
            annotations=annotations,
            provider_id=inst.provider_id,
            image_id=inst.image_id,
            capacity=dict(it.capacity) if it else {},
            allocatable=it.allocatable if it else {},
            launched=True,
            creation=inst.launch_time,
        )

    async def tag_registered(self, claim: NodeClaim, node_name: str) -> None:
        """After registration: tag the instance Name, karpenter.sh/nodeclaim, cluster name."""
        instance_id = tags.instance_id(claim.provider_id)
        await self.clients.ec2.create_tags(
            Resources=[instance_id],
            Tags=[
                {"Key": tags.NAME, "Value": node_name},
                {"Key": tags.NODECLAIM, "Value": claim.name},
                {"Key": tags.EKS_CLUSTER_NAME, "Value": self.settings.CLUSTER_NAME},
            ],
        )

    # --- get / list / delete / drift ---------------------------------------------------------

    def _claim_of(self, inst: instances.Instance) -> NodeClaim:
        labels = {
            lbl.INSTANCE_TYPE: inst.instance_type,
            lbl.ZONE: inst.zone,
            lbl.CAPACITY_TYPE: inst.capacity_type,
            lbl.NODEPOOL: inst.tags.get(tags.NODEPOOL, ""),
        }
        if inst.reservation_id:
            labels[rsv.ID_LABEL] = inst.reservation_id
        return NodeClaim(
            name=inst.tags.get(tags.NODECLAIM, ""),
            nodepool=inst.tags.get(tags.NODEPOOL, ""),
            labels=labels,
            provider_id=inst.provider_id,
            image_id=inst.image_id,
            launched=True,
            creation=inst.launch_time,
            instance_terminating=inst.state in ("shutting-down", "terminated"),
        )

    async def get(self, provider_id: str) -> NodeClaim:
        """The instance behind a provider id; NodeClaimNotFoundError once it is gone."""
        instance_id = tags.instance_id(provider_id)
        if not instance_id:
            raise NodeClaimNotFoundError(f"not an AWS provider id: {provider_id!r}")
        return self._claim_of(await self.instances.get(instance_id))

    async def list(self) -> list[NodeClaim]:
        """Every live instance tagged for this cluster by Karpenter."""
        return [self._claim_of(i) for i in await self.instances.list_tagged()]

    async def delete(self, claim: NodeClaim) -> None:
        """Terminate the instance; NodeClaimNotFoundError once it is gone."""
        instance_id = tags.instance_id(claim.provider_id)
        if not instance_id:
            raise NodeClaimNotFoundError(f"not an AWS provider id: {claim.provider_id!r}")
        inst = await self.instances.get(instance_id)
        zone_id = self.region.zone_ids.get(inst.zone, "")
        if zone_id in self.zonal_shifts.shifted(self.now()):
            # as upstream: nothing is terminated in a zone ARC shifted traffic away from
            raise CloudProviderError(
                f"refusing to terminate {instance_id}: zone {inst.zone} is zonal-shifted"
            )
        if inst.state not in ("shutting-down", "terminated"):
            await self.instances.terminate(instance_id)
            rid = inst.reservation_id or claim.labels.get(rsv.ID_LABEL, "")
            if rid:
                self.reservation_availability.release(rid)  # its slot frees with the instance

    async def is_drifted(self, claim: NodeClaim) -> str:
        """NodeClass-hash, AMI, security-group, subnet or placement-group drift (``""``: none)."""
        node_class = await self.nodeclasses.get(claim.node_class_ref.name)
        if node_class is None:
            return ""
        inst = await self.instances.get(tags.instance_id(claim.provider_id))
        it = next((t for t in self.catalog(node_class) if t.name == inst.instance_type), None)
        expected = amis.for_instance_type(node_class.status.amis, it) if it else None
        current = {
            awslbl.ANNOTATION_NODECLASS_HASH: nc.static_hash(
                node_class, self.settings.CLUSTER_CA_BUNDLE
            ),
            awslbl.ANNOTATION_NODECLASS_HASH_VERSION: awslbl.NODECLASS_HASH_VERSION,
        }
        facts = drift.InstanceFacts(
            inst.image_id,
            inst.subnet_id,
            inst.security_group_ids,
            inst.reservation_id or claim.labels.get(rsv.ID_LABEL, ""),
        )
        return drift.drift_reason(
            facts, node_class.status, expected, claim.annotations, current, claim.labels
        )


def _ignore_unavailable(code: str, instance_type: str, zone: str, capacity_type: str) -> None:
    del code, instance_type, zone, capacity_type
