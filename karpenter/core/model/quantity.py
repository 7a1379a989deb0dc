"""Kubernetes resource quantities, held exactly as integer milli-units.

A quantity such as ``1.5Gi``, ``250m`` or ``1e3`` is parsed without floating point into an
``int`` counting thousandths of the base unit (so ``"1"`` is ``1000`` and ``"100m"`` is ``100``).
Fractions finer than a milli-unit round up, as Kubernetes' ``MilliValue`` does, so a request is
never under-counted. Integers keep the arithmetic exact and fast, which the solver relies on.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE](?P<exp>[+-]?[0-9]+))?$"
)
MILLI = 1000


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> int:
    """Return ``value`` in milli-units, rounding sub-milli fractions up (away from zero)."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or number, got {value!r}")
    if isinstance(value, int):
        return value * MILLI
    if isinstance(value, float):
        value = repr(value)
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"invalid quantity {value!r}")
    number = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > 40:
            raise QuantityError(f"quantity exponent out of range in {value!r}")
        number *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"] or ""
        number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    milli = number * MILLI
    whole = -(-milli.numerator // milli.denominator)  # ceiling
    return -whole if match["sign"] == "-" else whole


def format_quantity(milli: int, resource: str = "") -> str:
    """Render milli-units for people: whole units when exact, else a decimal (``95.69``)."""
    if milli % MILLI == 0:
        units = milli // MILLI
        if resource in {"memory", "ephemeral-storage"} or resource.startswith("hugepages-"):
            for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
                if units >= factor and units % factor == 0:
                    return f"{units // factor}{suffix}"
        return str(units)
    if resource == "cpu":
        return f"{milli}m"
    text = f"{Fraction(milli, MILLI):.3f}".rstrip("0").rstrip(".")
    return text


def format_decimal(milli: int, resource: str = "") -> str:
    """Render milli-units as a plain decimal in the resource's human unit (GiB for memory)."""
    if resource in {"memory", "ephemeral-storage"}:
        gib = Fraction(milli, MILLI * 2**30)
        return f"{float(gib):.2f}".rstrip("0").rstrip(".") + "Gi"
    return f"{milli / MILLI:.2f}".rstrip("0").rstrip(".")
