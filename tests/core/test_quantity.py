"""Quantity parsing against Kubernetes' own values (exact milli-units, sub-milli rounds up).

``kubernetes_asyncio`` does not ship ``utils.quantity``, so the expected values are the ones
Kubernetes' ``resource.Quantity`` gives (``MilliValue``), written out.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from karpenter.core.model.quantity import QuantityError, parse_quantity


def _milli(text: str) -> int:
    """An independent reference: Decimal arithmetic with upstream's suffix table."""
    suffixes: dict[str, int | Decimal] = {
        "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
        "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": 10**3,
        "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    }  # fmt: skip
    for suffix, factor in suffixes.items():
        if text.endswith(suffix) and not text[: -len(suffix)].endswith(("e", "E")):
            value = Decimal(text[: -len(suffix)]) * factor * 1000
            break
    else:
        value = Decimal(text) * 1000
    return int(value.to_integral_value(rounding="ROUND_CEILING" if value > 0 else "ROUND_FLOOR"))


CASES = [
    pytest.param("1.5Gi", 1610612736000, id="1.5Gi"),
    pytest.param("100m", 100, id="100m"),
    pytest.param("1e3", 1_000_000, id="1e3"),
    pytest.param("0.1", 100, id="0.1"),
    pytest.param("2Ki", 2_048_000, id="2Ki"),
    pytest.param(".5", 500, id=".5"),
    pytest.param("1E2", 100_000, id="1E2"),
    pytest.param("+1", 1000, id="+1"),
    pytest.param("-1", -1000, id="-1"),
    pytest.param("12345678901234567890m", 12345678901234567890, id="huge-milli"),
    pytest.param("1", 1000, id="1"),
    pytest.param("0", 0, id="0"),
    pytest.param("250m", 250, id="250m"),
    pytest.param("1.5", 1500, id="1.5"),
    pytest.param("1k", 1_000_000, id="1k"),
    pytest.param("1M", 1_000_000_000, id="1M"),
    pytest.param("1G", 10**12, id="1G"),
    pytest.param("128974848", 128974848000, id="bytes"),
    pytest.param("129e6", 129 * 10**9, id="129e6"),
    pytest.param("123Mi", 123 * 2**20 * 1000, id="123Mi"),
    pytest.param("1n", 1, id="1n-rounds-up"),
    pytest.param("1u", 1, id="1u-rounds-up"),
    pytest.param("1500u", 2, id="1500u-rounds-up"),
    pytest.param("1e-3", 1, id="1e-3"),
    pytest.param("2.5Ti", int(2.5 * 2**40) * 1000, id="2.5Ti"),
    pytest.param("1Ei", 2**60 * 1000, id="1Ei"),
    pytest.param("5.", 5000, id="trailing-dot"),
]


@pytest.mark.parametrize(("text", "milli"), CASES)
def test_parse_quantity(text: str, milli: int) -> None:
    """A quantity parses to Kubernetes' milli-value, matching a Decimal reference."""
    assert parse_quantity(text) == milli
    assert _milli(text) == milli


@pytest.mark.parametrize(
    ("value", "milli"),
    [
        pytest.param(2, 2000, id="int"),
        pytest.param(0.5, 500, id="float"),
        pytest.param(1e3, 1_000_000, id="float-exponent"),
    ],
)
def test_parse_numbers(value: int | float, milli: int) -> None:
    """YAML numbers (ints and floats) parse like their decimal text."""
    assert parse_quantity(value) == milli


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("abc", id="letters"),
        pytest.param("", id="empty"),
        pytest.param("1.5.5", id="two-dots"),
        pytest.param("1Gb", id="bad-suffix"),
        pytest.param("1 Gi", id="inner-space"),
        pytest.param("Gi", id="suffix-only"),
        pytest.param("1e", id="bare-exponent"),
        pytest.param("1ki", id="lowercase-binary"),
        pytest.param("--1", id="double-sign"),
        pytest.param("1e999", id="exponent-out-of-range"),
        pytest.param(".", id="dot"),
    ],
)
def test_invalid_quantities(text: str) -> None:
    """Malformed quantities raise QuantityError."""
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_bool_is_not_a_quantity() -> None:
    """A YAML boolean is refused rather than read as 1 or 0."""
    with pytest.raises(QuantityError):
        parse_quantity(True)
