"""NodeClass resolution: selector terms → subnets, security groups, AMIs, instance profile,
placement group (``placement_groups.py``).

Each resolver turns ``spec`` terms into EC2/SSM/IAM filters the way upstream does (tag ``*``
means any value, all ``id`` terms share one query, AMI name terms default to owners
``self``/``amazon``) and ``status`` builds the conditions with upstream's reasons.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from karpenter.providers.aws.cloud import authcheck, capacityreservations, errors, placement_groups
from karpenter.providers.aws.cloud.clients import Clients
from karpenter.providers.aws.core import amifamily, amis
from karpenter.providers.aws.core import nodeclass as nc
from karpenter.providers.aws.core import reservations as rsv
from karpenter.providers.aws.core import tags as awstags

AMI_NOT_FOUND = "AMISelector did not match any AMIs"
SUBNETS_NOT_FOUND = "SubnetSelector did not match any Subnets"
SGS_NOT_FOUND = "SecurityGroupSelector did not match any SecurityGroups"


def tag_filters(tags: dict[str, str] | object) -> list[dict[str, object]]:
    """``tag:<k>=<v>`` filters; ``*`` becomes a ``tag-key`` filter."""
    out: list[dict[str, object]] = []
    for key, value in sorted(dict(tags).items()) if isinstance(tags, dict) else []:
        if value == "*":
            out.append({"Name": "tag-key", "Values": [key]})
        else:
            out.append({"Name": f"tag:{key}", "Values": [value]})
    return out


def _queries(terms: Sequence[nc.SelectorTerm], id_filter: str) -> list[list[dict[str, object]]]:
    ids = [t.id for t in terms if t.id]
    queries: list[list[dict[str, object]]] = [[{"Name": id_filter, "Values": ids}]] if ids else []
    for term in terms:
        if term.id:
            continue
        filters = tag_filters(dict(term.tags))
        if term.name:
            filters.append({"Name": "group-name", "Values": [term.name]})
        if filters:
            queries.append(filters)
    return queries


SSM_ALIAS_TTL = 24 * 3600.0  # public EKS parameters, as upstream
SSM_USER_TTL = 5 * 60.0  # the user's own spec.amiSelectorTerms[].ssmParameter


class SSMCache:
    """SSM parameter values with expiry; values whose AMI got deprecated are evicted."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[str, float]] = {}

    def get(self, name: str, now: float) -> str | None:
        """The cached value, if fresh."""
        found = self._values.get(name)
        return found[0] if found is not None and found[1] > now else None

    def put(self, name: str, value: str, until: float) -> None:
        """Remember a value until ``until``."""
        self._values[name] = (value, until)

    def evict_values(self, values: set[str]) -> None:
        """Forget every parameter holding one of these values."""
        for name in [n for n, (v, _) in self._values.items() if v in values]:
            del self._values[name]


@dataclass(frozen=True, slots=True)
class Resolver:
    """Resolves one NodeClass at a time against the cluster's account and region."""

    clients: Clients
    cluster_name: str
    k8s_version: str = "1.31"
    dry_run: bool = True  # DISABLE_DRY_RUN=true turns the authorization checks off
    ssm_cache: SSMCache = field(default_factory=SSMCache)
    auth_cache: authcheck.Cache = field(default_factory=authcheck.Cache)
    # the provider's reservation ledger: every discovery refreshes its counts
    availability: rsv.Availability | None = None
    # the ReservedCapacity feature gate: off, no reservation is resolved nor its condition set
    reserved_capacity: bool = True
    # spec.kubelet's verdict, (reason, message) or None (the provider's: it knows the types)
    kubelet_check: Callable[[nc.EC2NodeClass], tuple[str, str] | None] | None = None

    async def subnets(self, terms: Sequence[nc.SelectorTerm]) -> tuple[nc.Subnet, ...]:
        """Matching subnets, most free IPs first, then by id."""
        found: dict[str, nc.Subnet] = {}
        for filters in _queries(terms, "subnet-id"):
            out = await self.clients.ec2.describe_subnets(Filters=filters)
            for s in out.get("Subnets", []):
                found[s["SubnetId"]] = nc.Subnet(
                    s["SubnetId"],
                    s["AvailabilityZone"],
                    s.get("AvailabilityZoneId", ""),
                    int(s.get("AvailableIpAddressCount", 0)),
                )
        return tuple(sorted(found.values(), key=lambda s: (-s.available_ips, s.id)))

    async def security_groups(
        self, terms: Sequence[nc.SelectorTerm]
    ) -> tuple[nc.SecurityGroup, ...]:
        """Matching security groups, by id."""
        found: dict[str, nc.SecurityGroup] = {}
        for filters in _queries(terms, "group-id"):
            out = await self.clients.ec2.describe_security_groups(Filters=filters)
            for g in out.get("SecurityGroups", []):
                found[g["GroupId"]] = nc.SecurityGroup(g["GroupId"], g.get("GroupName", ""))
        return tuple(sorted(found.values(), key=lambda g: g.id))

    async def _ssm(self, name: str, now: float, ttl: float) -> str:
        cached = self.ssm_cache.get(name, now)
        if cached is not None:
            return cached
        try:
            out = await self.clients.ssm.get_parameter(Name=name)
        except Exception as err:
            if errors.is_not_found(err):
                return ""  # upstream skips missing alias parameters
            raise
        value = str(out["Parameter"]["Value"])
        self.ssm_cache.put(name, value, now + ttl)
        return value

    async def _alias_images(self, alias: str, now: float) -> list[tuple[str, str]]:
        parsed = amifamily.parse_alias(alias)
        found = []
        for param in amifamily.alias_parameters(parsed, self.k8s_version):
            image_id = await self._ssm(param.path, now, SSM_ALIAS_TTL)
            if image_id:
                found.append((image_id, param.variant))
        return found

    async def _describe(self, **kw: object) -> list[dict[str, object]]:
        out = await self.clients.ec2.describe_images(IncludeDeprecated=True, **kw)
        return [i for i in out.get("Images", []) if i.get("State", "available") == "available"]

    async def _term_ids(
        self, terms: Sequence[nc.SelectorTerm], now: float
    ) -> tuple[list[str], dict[str, str]]:
        """Image ids named directly, through aliases and through SSM parameters."""
        variants: dict[str, str] = {}
        ids = [t.id for t in terms if t.id]
        for term in terms:
            if term.alias:
                for image_id, variant in await self._alias_images(term.alias, now):
                    variants[image_id] = variant
                    ids.append(image_id)
            elif term.ssm_parameter:
                value = await self._ssm(term.ssm_parameter, now, SSM_USER_TTL)
                if value.startswith("ami-"):
                    ids.append(value)
        return ids, variants

    async def amis(self, terms: Sequence[nc.SelectorTerm], now: datetime) -> tuple[nc.AMI, ...]:
        """status.amis for the terms (aliases through SSM, then DescribeImages)."""
        ids, variants = await self._term_ids(terms, now.timestamp())
        raw: list[dict[str, object]] = []
        if ids:
            raw.extend(await self._describe(ImageIds=sorted(set(ids))))
        for term in terms:
            if not (term.id or term.alias or term.ssm_parameter):
                raw.extend(await self._describe(**_image_query(term)))
        images = [_image(i, variants) for i in raw]
        stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        # a deprecated AMI behind a cached parameter: read the parameter again next time
        self.ssm_cache.evict_values(
            {i.id for i in images if i.deprecation_time and i.deprecation_time <= stamp}
        )
        return amis.select(images, stamp)

    async def instance_profile(self, node_class: nc.EC2NodeClass) -> str:
        """spec.instanceProfile as is; for spec.role, Karpenter's own profile (created once)."""
        spec = node_class.spec
        if spec.instance_profile:
            await self.clients.iam.get_instance_profile(InstanceProfileName=spec.instance_profile)
            return spec.instance_profile
        region = self.clients.region
        name = profile_name(self.cluster_name, region, node_class.name, node_class.uid)
        try:
            out = await self.clients.iam.get_instance_profile(InstanceProfileName=name)
            roles = [r["RoleName"] for r in out["InstanceProfile"].get("Roles", [])]
        except Exception as err:
            if not errors.is_not_found(err):
                raise
            await self.clients.iam.create_instance_profile(
                InstanceProfileName=name,
                Path=f"/karpenter/{region}/{self.cluster_name}/{node_class.uid}/",
                Tags=[{"Key": k, "Value": v} for k, v in self._profile_tags(node_class).items()],
            )
            roles = []
        role = spec.role.rsplit("/", 1)[-1]  # a role path prefix is not part of the name
        if role not in roles:
            for old in roles:
                await self.clients.iam.remove_role_from_instance_profile(
                    InstanceProfileName=name, RoleName=old
                )
            await self.clients.iam.add_role_to_instance_profile(
                InstanceProfileName=name, RoleName=role
            )
        return name

    def _profile_tags(self, node_class: nc.EC2NodeClass) -> dict[str, str]:
        return {
            **node_class.spec.tags,
            awstags.cluster_tag(self.cluster_name): "owned",
            awstags.EKS_CLUSTER_NAME: self.cluster_name,
            awstags.NODECLASS: node_class.name,
            "topology.kubernetes.io/region": self.clients.region,
        }

    def _unsupported(self, terms: Sequence[nc.SelectorTerm]) -> str:
        for term in terms:
            if term.alias:
                why = amifamily.unsupported_alias(
                    amifamily.parse_alias(term.alias), self.k8s_version
                )
                if why:
                    return why
        return ""

    async def capacity_reservations(
        self, spec: nc.Spec, now: datetime
    ) -> tuple[rsv.CapacityReservation, ...]:
        """The selected reservations (none asked for without terms); counts go to the ledger."""
        terms = spec.capacity_reservation_selector_terms
        if not terms:
            return ()
        found = await capacityreservations.discover(self.clients.ec2, terms, now.timestamp())
        if self.availability is not None:
            self.availability.sync(found.available, now.timestamp())
        return found.reservations

    async def status(self, node_class: nc.EC2NodeClass, now: datetime) -> nc.Status:
        """The resolved status with upstream's conditions (Ready is their conjunction)."""
        spec = node_class.spec
        subnets = await self.subnets(spec.subnet_selector_terms)
        groups = await self.security_groups(spec.security_group_selector_terms)
        unsupported = self._unsupported(spec.ami_selector_terms)
        images = () if unsupported else await self.amis(spec.ami_selector_terms, now)
        group = await placement_groups.resolve(self.clients.ec2, spec.placement_group)
        conds = [
            nc.Condition(nc.COND_AMIS, "False", "UnsupportedAlias", unsupported)
            if unsupported
            else _cond(nc.COND_AMIS, bool(images), "AMINotFound", AMI_NOT_FOUND),
            _cond(nc.COND_SUBNETS, bool(subnets), "SubnetsNotFound", SUBNETS_NOT_FOUND),
            _cond(nc.COND_SECURITY_GROUPS, bool(groups), "SecurityGroupsNotFound", SGS_NOT_FOUND),
            group.condition,
        ]
        reservations: tuple[rsv.CapacityReservation, ...] = ()
        if self.reserved_capacity:
            reservations = await self.capacity_reservations(spec, now)
            conds.append(
                nc.Condition(nc.COND_CAPACITY_RESERVATIONS, "True", nc.COND_CAPACITY_RESERVATIONS)
            )
        profile = ""
        try:
            profile = await self.instance_profile(node_class)
            conds.append(nc.Condition(nc.COND_INSTANCE_PROFILE, "True", nc.COND_INSTANCE_PROFILE))
        except Exception as err:
            if not errors.is_not_found(err):
                raise
            msg = f'Instance profile "{spec.instance_profile or spec.role}" not found'
            conds.append(
                nc.Condition(nc.COND_INSTANCE_PROFILE, "False", "InstanceProfileNotFound", msg)
            )
        kubelet = self.kubelet_check(node_class) if self.kubelet_check else None
        validation = _validation(node_class, conds, kubelet)
        found = (group.group,) if group.group is not None else ()
        status = nc.Status(
            subnets,
            groups,
            images,
            profile,
            (),
            placement_groups=found,
            capacity_reservations=reservations,
        )
        if validation.status == "True" and self.dry_run:
            # the tags a launch would carry (no NodePool yet), as upstream's validation uses
            tags = awstags.instance_tags(spec.tags, self.cluster_name, "", node_class.name)
            denied = await authcheck.cached_check(
                self.clients.ec2, self.auth_cache, node_class, status, tags, now.timestamp()
            )
            validation = denied or validation
        conds.append(validation)
        return replace(status, conditions=nc.with_ready(tuple(conds)))


def _image_query(term: nc.SelectorTerm) -> dict[str, object]:
    filters = tag_filters(dict(term.tags))
    if term.name:
        filters.append({"Name": "name", "Values": [term.name]})
    query: dict[str, object] = {"Filters": filters}
    # upstream: a name without an owner looks in the account's own and Amazon's images
    owners = [term.owner] if term.owner else (["self", "amazon"] if term.name else [])
    if owners:
        query["Owners"] = owners
    return query


def _cond(kind: str, ok: bool, reason: str, message: str) -> nc.Condition:
    return nc.Condition(kind, "True", kind) if ok else nc.Condition(kind, "False", reason, message)


def _validation(
    node_class: nc.EC2NodeClass,
    conds: Sequence[nc.Condition],
    kubelet: tuple[str, str] | None = None,
) -> nc.Condition:
    # a bad spec.kubelet is the user's to fix whatever EC2 says, so it is reported first
    if kubelet is not None:
        return nc.Condition(nc.COND_VALIDATION, "False", *kubelet)
    if any(c.status != "True" for c in conds):
        return nc.Condition(
            nc.COND_VALIDATION,
            "False",
            "DependenciesNotReady",
            "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution",
        )
    try:
        awstags.validate(node_class.spec.tags)
    except awstags.TagError as err:
        return nc.Condition(nc.COND_VALIDATION, "False", "TagValidationFailed", str(err))
    return nc.Condition(nc.COND_VALIDATION, "True", nc.COND_VALIDATION)


def _image(raw: dict[str, object], variants: dict[str, str]) -> amis.Image:
    image_id = str(raw["ImageId"])
    return amis.Image(
        image_id,
        str(raw.get("Name", "")),
        str(raw.get("Architecture", "")),
        str(raw.get("CreationDate", "")),
        str(raw.get("DeprecationTime", "") or ""),
        variants.get(image_id, ""),
    )


def profile_name(cluster: str, region: str, nodeclass: str, uid: str) -> str:
    """``<cluster>_<hash(region, nodeclass name, uid)>`` (upstream hashes the same three)."""
    digest = hashlib.sha256(f"{region}/{nodeclass}/{uid}".encode()).digest()
    return f"{cluster}_{int.from_bytes(digest[:8], 'big')}"
