"""The fake catalog reproduces the contract's ``fake`` preset exactly."""

from __future__ import annotations

import pytest

from karpenter.core.catalogs.fake import fake_instance_types
from karpenter.core.model.instancetype import InstanceType

GIB = 2**30


def _values(it: InstanceType, key: str) -> tuple[str, ...] | None:
    req = it.requirements[key]
    return tuple(sorted(req.values)) if req.operator == "In" else None


def test_names_and_count() -> None:
    """count types are named fake-it-0 .. fake-it-{count-1}, in order."""
    types = fake_instance_types(7)
    assert [t.name for t in types] == [f"fake-it-{i}" for i in range(7)]
    assert fake_instance_types(0) == ()


@pytest.mark.parametrize(
    ("index", "size", "special"),
    [
        pytest.param(0, "small", None, id="1cpu-small"),
        pytest.param(3, "small", None, id="4cpu-small"),
        pytest.param(4, "large", ("optional",), id="5cpu-large"),
        pytest.param(99, "large", ("optional",), id="100cpu-large"),
    ],
)
def test_resources_and_labels(index: int, size: str, special: tuple[str, ...] | None) -> None:
    """Type i has i+1 CPUs, 2(i+1) GiB, 10(i+1) pods, and size/special by its size."""
    it = fake_instance_types(index + 1)[index]
    cpu = index + 1
    assert it.capacity == {
        "cpu": cpu * 1000,
        "memory": 2 * cpu * GIB * 1000,
        "pods": 10 * cpu * 1000,
    }
    assert it.overhead == {"cpu": 100, "memory": 10 * 2**20 * 1000}
    assert _values(it, "kubernetes.io/arch") == ("amd64",)
    assert _values(it, "kubernetes.io/os") == ("darwin", "linux", "windows")
    assert _values(it, "integer") == (str(cpu),)
    assert _values(it, "size") == (size,)
    if special is None:
        assert it.requirements["special"].operator == "DoesNotExist"
    else:
        assert _values(it, "special") == special


def test_offerings() -> None:
    """Five available offerings, spot zones 1-2 then on-demand zones 1-3, priced by size."""
    it = fake_instance_types(3)[2]
    price = 0.1 * 3 + 0.1 * 6 * GIB / 1e9
    assert [(o.capacity_type, o.zone) for o in it.offerings] == [
        ("spot", "test-zone-1"),
        ("spot", "test-zone-2"),
        ("on-demand", "test-zone-1"),
        ("on-demand", "test-zone-2"),
        ("on-demand", "test-zone-3"),
    ]
    assert all(o.available for o in it.offerings)
    assert all(o.price == pytest.approx(price) for o in it.offerings)
