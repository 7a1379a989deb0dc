"""The ``aws`` catalog preset: a region's real EC2 instance types, priced, offline.

EC2's instance-type descriptions and per-zone offerings come from the data moto bundles
(``moto/ec2/resources``: DescribeInstanceTypes and DescribeInstanceTypeOfferings captures), read
at run time; the capacity, overhead, labels and offerings are the provider's own
(``aws/core/catalog.py``), with the package's static VPC limits table for ``pod-eni``. Prices:
the scenario's ``priceFile``, else ``AWS_PRICE_FILE``, else the provider's labelled estimate
(simulate never calls the Pricing API).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from karpenter.api.simulation import CatalogSpec
from karpenter.core.catalogs.preset import CatalogError, PresetCatalog
from karpenter.core.model.instancetype import InstanceType
from karpenter.providers.aws.core import catalog, ec2types, pricing, vpclimits
from karpenter.providers.aws.core.capacity import CapacityOptions
from karpenter.providers.aws.core.ec2types import InstanceTypeInfo
from karpenter.providers.aws.settings import AWSSettings
from karpenter.settings import describe_error


class PresetError(ValueError):
    """The preset cannot be built (unknown region, missing data, bad price file)."""


@dataclass(frozen=True, slots=True)
class RegionData:
    """EC2's view of a region: descriptions, zones per type, zone ids."""

    infos: tuple[InstanceTypeInfo, ...]
    zones: Mapping[str, tuple[str, ...]]
    zone_ids: Mapping[str, str]


def _read_gz(*parts: str) -> object:
    try:
        root = resources.files("moto").joinpath("ec2", "resources", *parts)
        with root.open("rb") as raw, gzip.open(raw) as fh:
            return json.load(fh)
    except ModuleNotFoundError:
        raise PresetError(
            "the aws preset reads EC2 data bundled with moto: pip install moto"
        ) from None
    except FileNotFoundError:
        raise PresetError(f"no EC2 data for {'/'.join(parts)}") from None


def _zone_ids(region: str) -> dict[str, str]:
    # Both offering captures list the same (type, location) rows in the same order per zone;
    # pair zone names and ids by the set of types each offers.
    by_zone = _locations(
        _read_gz("instance_type_offerings", "availability-zone", f"{region}.json.gz")
    )
    by_id = _locations(
        _read_gz("instance_type_offerings", "availability-zone-id", f"{region}.json.gz")
    )
    out: dict[str, str] = {}
    for zone, types in by_zone.items():
        for zid, id_types in by_id.items():
            if types == id_types and zid not in out.values():
                out[zone] = zid
                break
    return out


def _locations(rows: object) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, Mapping):
            found.setdefault(str(row.get("Location")), set()).add(str(row.get("InstanceType")))
    return {k: frozenset(v) for k, v in found.items()}


@lru_cache(maxsize=1)
def vpc_limits() -> vpclimits.Table:
    """The VPC limits table shipped with the package (``hack/gen-vpc-limits.py``)."""
    try:
        blob = resources.files(vpclimits.DATA_PACKAGE).joinpath(*vpclimits.DATA_PATH).read_bytes()
        return vpclimits.decode(blob)
    except (OSError, vpclimits.VpcLimitsError) as err:
        raise PresetError(f"the packaged VPC limits table is unreadable: {err}") from None


@lru_cache(maxsize=4)
def region_data(region: str) -> RegionData:
    """The region's EC2 data (cached: presets in several scenarios share it)."""
    raw_types = _read_gz("instance_types.json.gz")
    offers = _read_gz("instance_type_offerings", "availability-zone", f"{region}.json.gz")
    zones: dict[str, list[str]] = {}
    for row in offers if isinstance(offers, list) else []:
        if isinstance(row, Mapping):
            zones.setdefault(str(row["InstanceType"]), []).append(str(row["Location"]))
    infos = tuple(
        ec2types.parse(v)
        for k, v in (raw_types.items() if isinstance(raw_types, Mapping) else ())
        if k in zones and isinstance(v, Mapping)
    )
    return RegionData(infos, {k: tuple(sorted(v)) for k, v in zones.items()}, _zone_ids(region))


def price_table(
    region: str, price_file: str, infos: tuple[InstanceTypeInfo, ...]
) -> pricing.PriceTable:
    """Prices from the file (if any), estimates for the rest."""
    table = pricing.PriceTable(region)
    if price_file:
        try:
            data = json.loads(Path(price_file).read_text(encoding="utf-8"))
        except OSError as err:
            raise PresetError(f"priceFile: cannot read {price_file}: {err.strerror}") from None
        except ValueError as err:
            raise PresetError(f"priceFile: {price_file} is not JSON: {err}") from None
        try:
            table = pricing.from_file(data, region)
        except pricing.PriceFileError as err:
            raise PresetError(f"priceFile: {price_file}: {err}") from None
    return pricing.fill_estimates(table, infos)


@dataclass(frozen=True, slots=True)
class Preset:
    """The preset's catalogue, and which of its types are priced by estimate."""

    types: tuple[InstanceType, ...]
    estimated: tuple[str, ...]

    def note(self) -> str:
        """A line for people when some prices are estimates (``""`` when none are)."""
        if not self.estimated:
            return ""
        return (
            f"prices of {len(self.estimated)} of {len(self.types)} aws instance types are "
            "estimates (give priceFile or AWS_PRICE_FILE for real prices)"
        )


def build(region: str, price_file: str, settings: AWSSettings) -> Preset:
    """The preset for ``region`` with the notes a caller should pass on."""
    data = region_data(region)
    prices = price_table(region, price_file or settings.AWS_PRICE_FILE, data.infos)
    types = _types(region, data, prices, settings)
    names = {t.name for t in types}
    return Preset(types, tuple(n for n in prices.estimated() if n in names))


def instance_types(region: str, price_file: str, settings: AWSSettings) -> tuple[InstanceType, ...]:
    """The preset's catalogue for ``region`` (AL2023 nodes, settings' overhead and ENIs)."""
    return build(region, price_file, settings).types


def _types(
    region: str, data: RegionData, prices: pricing.PriceTable, settings: AWSSettings
) -> tuple[InstanceType, ...]:
    inp = catalog.CatalogInput(
        region=region,
        zones=data.zones,
        prices=prices,
        zone_ids=data.zone_ids,
        capacity=CapacityOptions(
            vm_memory_overhead_percent=settings.VM_MEMORY_OVERHEAD_PERCENT,
            reserved_enis=settings.RESERVED_ENIS,
            vpc_limits=vpc_limits().types,
        ),
    )
    return catalog.build(data.infos, inp)


def scenario_catalog(spec: CatalogSpec) -> PresetCatalog:
    """The preset as ``simulate`` asks for it: AWS settings from the environment, the region
    from the document, else ``AWS_REGION``, else us-west-2 (the simulator never asks IMDS)."""
    try:
        aws = AWSSettings()
    except (ValidationError, ValueError) as err:
        raise CatalogError(f"invalid settings: {describe_error(err)}") from None
    region = spec.region or aws.AWS_REGION or "us-west-2"
    try:
        built = build(region, spec.price_file, aws)
    except PresetError as err:
        raise CatalogError(f"InstanceTypeCatalog (aws, {region}): {err}") from None
    return PresetCatalog(built.types, built.note())
