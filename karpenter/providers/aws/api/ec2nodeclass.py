"""The EC2NodeClass manifest (``karpenter.k8s.aws/v1``): the CRD's rules, ``to_core``, status out.

Validation mirrors ``config/crd/karpenter.k8s.aws_ec2nodeclasses.yaml`` (selector-term
exclusivity, alias format and family, amiFamily/alias agreement, role xor instanceProfile,
restricted tags, block devices) with the same messages, so a manifest the
apiserver would refuse is refused here too. ``from_manifest`` reads an object with its status
(``ec2nodeclass_status`` renders and reads the status block). ``spec.kubelet`` is an open
map, as upstream's CRD has it: ``aws/core/kubeletconfig.py`` checks it for the controller.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from karpenter.api import crdfields as f
from karpenter.core.model.quantity import parse_quantity
from karpenter.providers.aws.api import ec2nodeclass_reservations as reservations
from karpenter.providers.aws.api import ec2nodeclass_status
from karpenter.providers.aws.core import amifamily, kubeletconfig, tags
from karpenter.providers.aws.core import nodeclass as nc

_ALIAS = re.compile(r"^[a-zA-Z0-9]+@.+$")
_VOLUME = re.compile(
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|"
    r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|"
    r"([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)


def _tags(value: dict[str, str], limit: int) -> dict[str, str]:
    if len(value) > limit:
        raise ValueError(f"at most {limit} tags")
    if any(not k or not v for k, v in value.items()):
        raise ValueError("empty tag keys or values aren't supported")
    return value


class _Term(f.Model):
    tags: dict[str, str] | None = None
    id: str | None = None

    @field_validator("tags")
    @classmethod
    def _t(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return _tags(value, 20) if value is not None else None


class _SubnetTerm(_Term):
    id: str | None = Field(default=None, pattern=r"subnet-[0-9a-z]+")

    @model_validator(mode="after")
    def _one(self) -> _SubnetTerm:
        if self.tags is None and self.id is None:
            raise ValueError("expected at least one, got none, ['tags', 'id']")
        if self.id is not None and self.tags is not None:
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields "
                "in a subnet selector term"
            )
        return self


class _GroupTerm(_Term):
    id: str | None = Field(default=None, pattern=r"sg-[0-9a-z]+")
    name: str | None = None

    @model_validator(mode="after")
    def _one(self) -> _GroupTerm:
        set_ = [k for k in ("tags", "id", "name") if getattr(self, k) is not None]
        if not set_:
            raise ValueError("expected at least one, got none, ['tags', 'id', 'name']")
        for key, others in (("id", (self.tags, self.name)), ("name", (self.tags, self.id))):
            if getattr(self, key) is not None and any(o is not None for o in others):
                raise ValueError(
                    f"'{key}' is mutually exclusive, cannot be set with a combination of other "
                    "fields in a security group selector term"
                )
        return self


class _AMITerm(_Term):
    id: str | None = Field(default=None, pattern=r"ami-[0-9a-z]+")
    alias: str | None = Field(default=None, max_length=30)
    name: str | None = None
    owner: str | None = None
    ssm_parameter: str | None = Field(default=None, alias="ssmParameter")

    @field_validator("alias")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _ALIAS.match(value):
            raise ValueError(
                "'alias' is improperly formatted, must match the format 'family@version'"
            )
        try:
            amifamily.parse_alias(value)
        except amifamily.AliasError as err:
            raise ValueError(str(err)) from None
        return value

    @model_validator(mode="after")
    def _one(self) -> _AMITerm:
        fields = ("tags", "id", "name", "alias", "ssm_parameter")
        if all(getattr(self, k) is None for k in fields):
            raise ValueError(
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"
            )
        others = (self.tags, self.name, self.owner)
        for key, extra in (("id", self.alias), ("alias", self.id)):
            if getattr(self, key) is not None and (
                extra is not None or any(o is not None for o in others)
            ):
                raise ValueError(
                    f"'{key}' is mutually exclusive, cannot be set with a combination of other "
                    "fields in amiSelectorTerms"
                )
        return self

    def to_core(self) -> nc.SelectorTerm:
        return nc.SelectorTerm(
            dict(self.tags or {}),
            self.id or "",
            self.name or "",
            self.owner or "",
            self.alias or "",
            self.ssm_parameter or "",
        )


class _EBS(f.Model):
    delete_on_termination: bool | None = Field(default=None, alias="deleteOnTermination")
    encrypted: bool | None = None
    iops: int | None = None
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    throughput: int | None = None
    volume_size: str | None = Field(default=None, alias="volumeSize", pattern=_VOLUME.pattern)
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = Field(
        default=None, alias="volumeType"
    )

    @model_validator(mode="after")
    def _size(self) -> _EBS:
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("snapshotID or volumeSize must be defined")
        return self


class _BDM(f.Model):
    device_name: str | None = Field(default=None, alias="deviceName")
    ebs: _EBS | None = None
    root_volume: bool = Field(default=False, alias="rootVolume")

    def to_core(self) -> nc.BlockDevice:
        ebs = self.ebs
        size = parse_quantity(ebs.volume_size) // 1000 if ebs and ebs.volume_size else None
        return nc.BlockDevice(
            self.device_name or "",
            size,
            (ebs.volume_type if ebs else None) or "gp3",
            ebs.encrypted if ebs and ebs.encrypted is not None else True,
            ebs.delete_on_termination if ebs and ebs.delete_on_termination is not None else True,
            ebs.iops if ebs else None,
            ebs.throughput if ebs else None,
            (ebs.kms_key_id if ebs else None) or "",
            (ebs.snapshot_id if ebs else None) or "",
            self.root_volume,
        )


class _Metadata(f.Model):
    http_endpoint: Literal["enabled", "disabled"] = Field(default="enabled", alias="httpEndpoint")
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(
        default="disabled", alias="httpProtocolIPv6"
    )
    hop_limit: int = Field(default=1, alias="httpPutResponseHopLimit", ge=1, le=64)
    http_tokens: Literal["required", "optional"] = Field(default="required", alias="httpTokens")


class _ConnTrack(f.Model):
    tcp: int | None = Field(default=None, alias="tcpEstablishedTimeout", ge=60, le=432000)
    udp_stream: int | None = Field(default=None, alias="udpStreamTimeout", ge=60, le=180)
    udp: int | None = Field(default=None, alias="udpTimeout", ge=30, le=60)

    @model_validator(mode="after")
    def _one(self) -> _ConnTrack:
        if self.tcp is None and self.udp_stream is None and self.udp is None:
            raise ValueError("at least one connection tracking timeout must be set")
        return self


class _CPUOptions(f.Model):
    nested_virtualization: Literal["enabled", "disabled"] | None = Field(
        default=None, alias="nestedVirtualization"
    )


class _NIC(f.Model):
    network_card_index: int = Field(alias="networkCardIndex", ge=0)
    device_index: int = Field(alias="deviceIndex", ge=0)
    interface_type: Literal["interface", "efa-only"] = Field(alias="interfaceType")


class _PlacementGroup(f.Model):
    id: str | None = Field(default=None, pattern=r"^pg-[0-9a-z]+$")
    name: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> _PlacementGroup:
        if (self.id is None) == (self.name is None):
            raise ValueError("exactly one of ['name', 'id'] must be set")
        return self


def _check_nics(nics: list[_NIC]) -> None:
    pairs = [(n.network_card_index, n.device_index) for n in nics]
    if (0, 0) not in {
        p for p, n in zip(pairs, nics, strict=True) if n.interface_type == "interface"
    }:
        raise ValueError(
            "networkInterfaces must include the primary interface (networkCardIndex 0, "
            "deviceIndex 0, interfaceType interface)"
        )
    if len(set(pairs)) != len(pairs):
        raise ValueError("networkCardIndex and deviceIndex pairs must be unique")


class _Spec(f.Model):
    subnet_selector_terms: list[_SubnetTerm] = Field(
        alias="subnetSelectorTerms", min_length=1, max_length=30
    )
    security_group_selector_terms: list[_GroupTerm] = Field(
        alias="securityGroupSelectorTerms", min_length=1, max_length=30
    )
    ami_selector_terms: list[_AMITerm] = Field(
        alias="amiSelectorTerms", min_length=1, max_length=30
    )
    ami_family: (
        Literal[
            "AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"
        ]
        | None
    ) = Field(default=None, alias="amiFamily")
    role: str | None = None
    instance_profile: str | None = Field(default=None, alias="instanceProfile")
    user_data: str | None = Field(default=None, alias="userData")
    tags: dict[str, str] = Field(default_factory=dict, max_length=50)
    # an open map (the CRD preserves it): checked by the NodeClass controller, not here
    kubelet: dict[str, Any] = Field(default_factory=dict)
    block_device_mappings: list[_BDM] = Field(
        default_factory=list, alias="blockDeviceMappings", max_length=50
    )
    instance_store_policy: Literal["RAID0"] | None = Field(
        default=None, alias="instanceStorePolicy"
    )
    metadata_options: _Metadata = Field(default_factory=_Metadata, alias="metadataOptions")
    associate_public_ip: bool | None = Field(default=None, alias="associatePublicIPAddress")
    detailed_monitoring: bool = Field(default=False, alias="detailedMonitoring")
    context: str | None = None
    network_interfaces: list[_NIC] | None = Field(
        default=None, alias="networkInterfaces", max_length=150
    )
    placement_group: _PlacementGroup | None = Field(default=None, alias="placementGroupSelector")
    ip_prefix_count: int | None = Field(default=None, alias="ipPrefixCount", ge=0)
    connection_tracking: _ConnTrack | None = Field(default=None, alias="connectionTracking")
    cpu_options: _CPUOptions | None = Field(default=None, alias="cpuOptions")
    capacity_reservation_selector_terms: list[reservations.CapacityReservationTerm] = Field(
        default_factory=list, alias="capacityReservationSelectorTerms", max_length=30
    )

    @field_validator("network_interfaces")
    @classmethod
    def _nics(cls, value: list[_NIC] | None) -> list[_NIC] | None:
        if value is not None:
            _check_nics(value)
        return value

    @field_validator("tags")
    @classmethod
    def _restricted(cls, value: dict[str, str]) -> dict[str, str]:
        tags.validate(value)
        return value

    @model_validator(mode="after")
    def _rules(self) -> _Spec:
        if (self.role is None) == (self.instance_profile is None):
            raise ValueError("must specify exactly one of ['role', 'instanceProfile']")
        if self.role == "":
            raise ValueError("role cannot be empty")
        if self.instance_profile == "":
            raise ValueError("instanceProfile cannot be empty")
        aliases = [t.alias for t in self.ami_selector_terms if t.alias]
        if aliases and len(self.ami_selector_terms) != 1:
            raise ValueError(
                "'alias' is mutually exclusive, cannot be set with a combination of other "
                "amiSelectorTerms"
            )
        if not aliases and self.ami_family is None:
            raise ValueError("must specify amiFamily if amiSelectorTerms does not contain an alias")
        if aliases and self.ami_family is not None:
            family = amifamily.parse_alias(aliases[0]).family
            if self.ami_family not in (family, "Custom"):
                article = "an" if family in ("AL2", "AL2023") else "a"
                raise ValueError(
                    f"if set, amiFamily must be '{family}' or 'Custom' when using {article} "
                    f"{family} alias"
                )
        if sum(1 for b in self.block_device_mappings if b.root_volume) > 1:
            raise ValueError("must have only one blockDeviceMappings with rootVolume")
        return self


class EC2NodeClassDoc(f.Model):
    """A karpenter.k8s.aws/v1 EC2NodeClass manifest."""

    metadata: f.ObjectMeta
    spec: _Spec
    uid: str = ""
    generation: int = 1

    @model_validator(mode="before")
    @classmethod
    def _meta(cls, data: Any) -> Any:
        # uid/generation live in metadata
        if isinstance(data, dict):
            meta = data.get("metadata") or {}
            extra: dict[str, Any] = {
                "uid": meta.get("uid", ""),
                "generation": meta.get("generation", 1),
            }
            return {**data, **extra}
        return data

    def to_core(self, status: nc.Status | None = None) -> nc.EC2NodeClass:
        """The core value (volume sizes in bytes)."""
        s = self.spec
        m = s.metadata_options
        spec = nc.Spec(
            tuple(nc.SelectorTerm(dict(t.tags or {}), t.id or "") for t in s.subnet_selector_terms),
            tuple(
                nc.SelectorTerm(dict(t.tags or {}), t.id or "", t.name or "")
                for t in s.security_group_selector_terms
            ),
            tuple(t.to_core() for t in s.ami_selector_terms),
            s.ami_family or "",
            s.role or "",
            s.instance_profile or "",
            s.user_data or "",
            dict(s.tags),
            kubeletconfig.managed(s.kubelet),
            dict(s.kubelet),
            tuple(b.to_core() for b in s.block_device_mappings),
            s.instance_store_policy or "",
            nc.MetadataOptions(m.http_endpoint, m.http_protocol_ipv6, m.hop_limit, m.http_tokens),
            s.associate_public_ip,
            s.detailed_monitoring,
            s.context or "",
            tuple(
                nc.NetworkInterface(n.network_card_index, n.device_index, n.interface_type)
                for n in s.network_interfaces or ()
            ),
            s.ip_prefix_count,
            nc.ConnectionTracking(ct.tcp, ct.udp_stream, ct.udp)
            if (ct := s.connection_tracking)
            else None,
            nested_virtualization=(s.cpu_options.nested_virtualization or "")
            if s.cpu_options
            else "",
            placement_group=nc.SelectorTerm(id=pg.id or "", name=pg.name or "")
            if (pg := s.placement_group)
            else None,
            capacity_reservation_selector_terms=tuple(
                t.to_core() for t in s.capacity_reservation_selector_terms
            ),
        )
        return nc.EC2NodeClass(
            self.metadata.name,
            spec,
            status or nc.Status(),
            self.uid,
            self.generation,
            self.metadata.deletion_timestamp is not None,
            dict(self.metadata.annotations),
        )


def from_manifest(obj: Any) -> nc.EC2NodeClass:
    """An EC2NodeClass object as the apiserver returns it (spec validated, status read)."""
    doc = EC2NodeClassDoc.model_validate(obj)
    raw = obj.get("status") if isinstance(obj, dict) else None
    return doc.to_core(ec2nodeclass_status.status_from_doc(raw))
