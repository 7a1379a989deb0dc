"""Requirement algebra, quantities and taints: the truth tables the solver stands on."""

from __future__ import annotations

import pytest

from karpenter.core.model.quantity import QuantityError, parse_quantity
from karpenter.core.scheduling.requirements import Requirement, RequirementError, Requirements
from karpenter.core.scheduling.taints import Taint, Toleration, untolerated

R = Requirement.new
NONE: frozenset[str] = frozenset()


@pytest.mark.parametrize(
    ("a", "b", "allowed", "forbidden"),
    [
        pytest.param(
            R("k", "In", ["a", "b"]), R("k", "In", ["b", "c"]), ["b"], ["a", "c"], id="in-in"
        ),
        pytest.param(R("k", "In", ["a", "b"]), R("k", "NotIn", ["a"]), ["b"], ["a"], id="in-notin"),
        pytest.param(
            R("k", "NotIn", ["a"]), R("k", "NotIn", ["b"]), ["c"], ["a", "b"], id="notin-notin"
        ),
        pytest.param(R("k", "Exists"), R("k", "In", ["x"]), ["x"], ["y"], id="exists-in"),
        pytest.param(
            R("k", "Gt", ["3"]), R("k", "Lt", ["6"]), ["4", "5"], ["3", "6", "x"], id="gt-lt"
        ),
        pytest.param(R("k", "Gte", ["3"]), R("k", "Lte", ["3"]), ["3"], ["2", "4"], id="gte-lte"),
        pytest.param(R("k", "Gt", ["3"]), R("k", "In", ["2", "5"]), ["5"], ["2"], id="gt-in"),
        pytest.param(R("k", "Gt", ["5"]), R("k", "Lt", ["3"]), [], ["4"], id="inverted-bounds"),
        pytest.param(R("k", "DoesNotExist"), R("k", "In", ["a"]), [], ["a"], id="dne-in"),
    ],
)
def test_intersection(
    a: Requirement, b: Requirement, allowed: list[str], forbidden: list[str]
) -> None:
    """An intersection allows exactly the values both sides allow, in both orders."""
    for merged in (a.intersection(b), b.intersection(a)):
        assert all(merged.has(v) for v in allowed)
        assert not any(merged.has(v) for v in forbidden)


@pytest.mark.parametrize(
    ("node", "pod", "compatible"),
    [
        pytest.param({"zone": "a"}, [R("zone", "In", ["a"])], True, id="match"),
        pytest.param({"zone": "a"}, [R("zone", "In", ["b"])], False, id="mismatch"),
        pytest.param({}, [R("team", "In", ["x"])], False, id="undefined-custom"),
        pytest.param({}, [R("team", "NotIn", ["x"])], True, id="notin-undefined"),
        pytest.param({}, [R("team", "DoesNotExist")], True, id="dne-undefined"),
        pytest.param({"zone": "a"}, [R("zone", "NotIn", ["a"])], False, id="notin-hit"),
        pytest.param({"n": "7"}, [R("n", "Gt", ["5"])], True, id="gt"),
    ],
)
def test_strict_compatibility(
    node: dict[str, str], pod: list[Requirement], compatible: bool
) -> None:
    """Node labels vs pod requirements, as the kube-scheduler's node affinity decides."""
    assert Requirements.from_labels(node).compatible(Requirements(pod), frozenset()) is compatible


def test_undefined_well_known_allowed() -> None:
    """A NodePool may leave well-known labels undefined; the pod's value is then allowed."""
    pool = Requirements()
    pod = Requirements([R("topology.kubernetes.io/zone", "In", ["a"])])
    assert pool.compatible(pod, frozenset({"topology.kubernetes.io/zone"}))
    assert pool.compatibility_errors(pod, frozenset()) == [
        "label 'topology.kubernetes.io/zone' does not have known values"
    ]


def test_beta_labels_normalized() -> None:
    """Deprecated beta keys read as their GA names."""
    assert (
        R("failure-domain.beta.kubernetes.io/zone", "In", ["a"]).key
        == "topology.kubernetes.io/zone"
    )


@pytest.mark.parametrize(
    ("op", "values"),
    [
        pytest.param("Gt", ["x"], id="gt-not-int"),
        pytest.param("Lt", ["1", "2"], id="lt-two-values"),
        pytest.param("Near", ["a"], id="unknown-op"),
    ],
)
def test_invalid_requirements(op: str, values: list[str]) -> None:
    """Malformed requirements are refused with a RequirementError."""
    with pytest.raises(RequirementError):
        R("k", op, values)


def test_min_values_takes_max() -> None:
    """Intersecting keeps the larger minValues."""
    assert (
        R("k", "Exists", min_values=2).intersection(R("k", "Exists", min_values=5)).min_values == 5
    )


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        pytest.param("1", 1000, id="one"),
        pytest.param("100m", 100, id="milli"),
        pytest.param("1.5Gi", 1536 * 2**20 * 1000, id="gibi"),
        pytest.param("2Ki", 2048000, id="kibi"),
        pytest.param("1e3", 1_000_000, id="exponent"),
        pytest.param("1E2", 100_000, id="upper-exponent"),
        pytest.param(".5", 500, id="leading-dot"),
        pytest.param("0.1", 100, id="decimal"),
        pytest.param("+1", 1000, id="plus"),
        pytest.param("-1", -1000, id="minus"),
        pytest.param("1n", 1, id="nano-rounds-up"),
        pytest.param("12345678901234567890m", 12345678901234567890, id="huge"),
        pytest.param(3, 3000, id="int"),
    ],
)
def test_quantities(text: str | int, milli: int) -> None:
    """Quantities parse exactly to milli-units, sub-milli fractions rounding up."""
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("text", ["abc", "1.2.3", "1Gb", "", "1 Gi", "--1"])
def test_invalid_quantities(text: str) -> None:
    """Malformed quantities raise QuantityError."""
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        pytest.param(
            Toleration("a", "Equal", "x", "NoSchedule"),
            Taint("a", "NoSchedule", "x"),
            True,
            id="equal",
        ),
        pytest.param(
            Toleration("a", "Equal", "y"), Taint("a", "NoSchedule", "x"), False, id="value-differs"
        ),
        pytest.param(
            Toleration("a", "Exists"), Taint("a", "NoExecute", "x"), True, id="exists-any-effect"
        ),
        pytest.param(
            Toleration("a", "Exists", effect="NoSchedule"),
            Taint("a", "NoExecute"),
            False,
            id="effect-differs",
        ),
        pytest.param(Toleration(operator="Exists"), Taint("b", "NoSchedule"), True, id="wildcard"),
        pytest.param(
            Toleration("", "Equal"), Taint("b", "NoSchedule"), False, id="empty-key-equal"
        ),
    ],
)
def test_tolerations(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    """Kubernetes' toleration matching."""
    assert (not untolerated([taint], [toleration])) is tolerated
