"""Prices: on-demand per type, spot per type and zone, and where each number came from.

Sources, best first: the live Pricing API / DescribeSpotPriceHistory (parsed here, fetched by
the adapter), a user price file (``{"onDemand": {region: {type: usd}}, "spot": {...}}``),
then an estimate from vCPUs, memory and GPUs that is labelled as one. As upstream does, a
region missing from a file falls back to its ``us-east-1`` table, and until spot prices are
known the on-demand price stands in for spot in every zone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter.providers.aws.core.ec2types import InstanceTypeInfo

SOURCE_API = "pricing-api"
SOURCE_FILE = "price-file"
SOURCE_ESTIMATE = "estimate"
FALLBACK_REGION = "us-east-1"

# Estimate coefficients, fitted by hand on us-east-1 general purpose / compute / memory
# families (m5.large 0.096, c5.large 0.085, r5.large 0.126) and GPU types (g4dn, p3).
EST_PER_VCPU = 0.037
EST_PER_GIB = 0.00275
EST_PER_GPU = 0.45
REFRESH_SECONDS = 12 * 3600.0


class PriceFileError(ValueError):
    """A price file does not have the documented shape."""


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices of one region; ``sources`` says per type where its on-demand price came from."""

    region: str
    on_demand: Mapping[str, float] = field(default_factory=dict)
    spot: Mapping[tuple[str, str], float] = field(default_factory=dict)
    spot_default: Mapping[str, float] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)

    def on_demand_price(self, instance_type: str) -> float | None:
        """USD/h on demand, or None when unknown."""
        return self.on_demand.get(instance_type)

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        """USD/h spot in a zone: the zone's price, else the zone-agnostic seed, else None."""
        price = self.spot.get((instance_type, zone))
        if price is not None:
            return price
        # once real spot data exists for a type, a zone without a price has no offering
        if any(t == instance_type for t, _ in self.spot):
            return None
        return self.spot_default.get(instance_type)

    def estimated(self) -> tuple[str, ...]:
        """Types whose price is an estimate, sorted."""
        return tuple(sorted(t for t, s in self.sources.items() if s == SOURCE_ESTIMATE))


def estimate(info: InstanceTypeInfo) -> float:
    """A rough on-demand USD/h for a type nobody priced (labelled as an estimate)."""
    gpus = sum(g.count for g in info.gpus) + sum(d.count for d in info.neuron)
    price = EST_PER_VCPU * info.vcpus + EST_PER_GIB * info.memory_mib / 1024 + EST_PER_GPU * gpus
    return round(price, 4)


def _prices(raw: object, where: str) -> dict[str, float]:
    if not isinstance(raw, Mapping):
        raise PriceFileError(f"{where}: expected an object of instance type → price")
    out = {}
    for name, price in raw.items():
        if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
            raise PriceFileError(f"{where}.{name}: expected a non-negative number")
        out[str(name)] = float(price)
    return out


def _region(raw: Mapping[str, object], key: str, region: str) -> tuple[str, object] | None:
    section = raw.get(key)
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise PriceFileError(f"{key}: expected an object of region → prices")
    for name in (region, FALLBACK_REGION):
        if name in section:
            return name, section[name]
    return None


def _spot(raw: object, where: str) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    # spot entries are either a price (any zone) or {zone: price}
    if not isinstance(raw, Mapping):
        raise PriceFileError(f"{where}: expected an object")
    zonal: dict[tuple[str, str], float] = {}
    flat: dict[str, float] = {}
    for name, value in raw.items():
        if isinstance(value, Mapping):
            for zone, price in _prices(value, f"{where}.{name}").items():
                zonal[(str(name), zone)] = price
        else:
            flat.update(_prices({name: value}, where))
    return zonal, flat


def from_file(data: object, region: str) -> PriceTable:
    """A table from a decoded price file; raises PriceFileError naming the bad field."""
    if not isinstance(data, Mapping):
        raise PriceFileError("expected an object with onDemand (and optionally spot)")
    found = _region(data, "onDemand", region)
    if found is None:
        raise PriceFileError(f"onDemand: no prices for {region} (nor {FALLBACK_REGION})")
    on_demand = _prices(found[1], f"onDemand.{found[0]}")
    spot_found = _region(data, "spot", region)
    zonal, flat = _spot(spot_found[1], f"spot.{spot_found[0]}") if spot_found else ({}, {})
    return PriceTable(
        region,
        on_demand,
        zonal,
        {**on_demand, **flat},
        dict.fromkeys(on_demand, SOURCE_FILE),
    )


def fill_estimates(table: PriceTable, infos: tuple[InstanceTypeInfo, ...]) -> PriceTable:
    """The table with an estimate for every type it has no on-demand price for."""
    missing = {i.name: estimate(i) for i in infos if i.name not in table.on_demand}
    if not missing:
        return table
    return PriceTable(
        table.region,
        {**table.on_demand, **missing},
        table.spot,
        {**missing, **table.spot_default},
        {**table.sources, **dict.fromkeys(missing, SOURCE_ESTIMATE)},
    )


def merge(
    table: PriceTable,
    on_demand: Mapping[str, float] | None = None,
    spot: Mapping[tuple[str, str], float] | None = None,
) -> PriceTable:
    """Newer prices over older ones; a refresh never shrinks the table (as upstream)."""
    od = {**table.on_demand, **(on_demand or {})}
    sources = {**table.sources, **dict.fromkeys(on_demand or {}, SOURCE_API)}
    return PriceTable(table.region, od, {**table.spot, **(spot or {})}, table.spot_default, sources)


def pricing_api_region(region: str) -> str:
    """The region whose Pricing API endpoint serves ``region``."""
    for prefix, endpoint in (
        ("ap-", "ap-south-1"),
        ("cn-", "cn-northwest-1"),
        ("eu-", "eu-central-1"),
    ):
        if region.startswith(prefix):
            return endpoint
    return "us-east-1"


def parse_price_list_item(item: str) -> tuple[str, float] | None:
    """One GetProducts PriceList entry (a JSON string) → (instance type, USD/h), if priced.

    Entries without an instance type or with only zero prices are skipped (None).
    """
    try:
        doc = json.loads(item)
    except ValueError:
        return None
    product = doc.get("product") if isinstance(doc, dict) else None
    attrs = product.get("attributes") if isinstance(product, dict) else None
    name = attrs.get("instanceType") if isinstance(attrs, dict) else None
    terms = doc.get("terms", {}).get("OnDemand") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not isinstance(terms, dict):
        return None
    for term in terms.values():
        dims = term.get("priceDimensions", {}) if isinstance(term, dict) else {}
        for dim in dims.values():
            unit = dim.get("pricePerUnit", {}) if isinstance(dim, dict) else {}
            for currency in ("USD", "CNY"):
                try:
                    price = float(unit.get(currency, "0"))
                except (TypeError, ValueError):
                    continue
                if price > 0:
                    return name, price
    return None


def pricing_filters(region: str, bare_metal: bool) -> list[dict[str, str]]:
    """GetProducts TERM_MATCH filters for Linux on-demand shared (or bare-metal dedicated)."""
    pairs = {
        "regionCode": region,
        "serviceCode": "AmazonEC2",
        "preInstalledSw": "NA",
        "operatingSystem": "Linux",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
        "tenancy": "Dedicated" if bare_metal else "Shared",
        "productFamily": "Compute Instance (bare metal)" if bare_metal else "Compute Instance",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()]
