"""The viewer's model as tables: states, rows, prices, totals, sorting, filters, selectors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from karpenter.core.model import labels as lbl
from karpenter.core.model.node import Node, NodeClaim
from karpenter.core.scheduling.taints import NO_SCHEDULE, Taint
from karpenter.viewer import model, selector
from tests.support import builders as b

M2 = b.catalog()[1]  # m-2x: 2 cpu, 8Gi, on-demand 0.18/h, spot 0.09/h
NOW = 1_000_000.0


def _node(name: str = "n1", **kw: object) -> Node:
    return b.managed_node(name, M2, creation=NOW - 600, **kw)  # type: ignore[arg-type]


def _claim(name: str = "n1", **kw: object) -> NodeClaim:
    values: dict[str, object] = {
        "nodepool": "default",
        "labels": {lbl.NODEPOOL: "default", lbl.INSTANCE_TYPE: M2.name},
        "creation": NOW - 700,
    }
    values.update(kw)
    return NodeClaim(name, **values)  # type: ignore[arg-type]


DISRUPTED = Taint(lbl.TAINT_DISRUPTED, "", NO_SCHEDULE)


@pytest.mark.parametrize(
    ("node", "claim", "state"),
    [
        pytest.param(None, _claim(), model.LAUNCHING, id="claim-without-node"),
        pytest.param(
            replace(_node(), labels={lbl.NODEPOOL: "default"}),
            _claim(),
            model.LAUNCHING,
            id="node-not-registered",
        ),
        pytest.param(
            replace(_node(), labels={lbl.NODEPOOL: "default"}),
            _claim(registered=True),
            model.REGISTERED,
            id="registered",
        ),
        pytest.param(
            _node(), _claim(registered=True, initialized=True), model.INITIALIZED, id="init"
        ),
        pytest.param(_node(taints=(DISRUPTED,)), _claim(), model.DISRUPTING, id="disrupted-taint"),
        pytest.param(_node(deleting=True), _claim(), model.TERMINATING, id="node-deleting"),
        pytest.param(None, _claim(deleting=True), model.TERMINATING, id="claim-deleting"),
        pytest.param(b.node("plain"), None, model.UNMANAGED, id="unmanaged"),
    ],
)
def test_node_state(node: Node | None, claim: NodeClaim | None, state: str) -> None:
    """A row's state is the furthest lifecycle step, deletion and disruption first."""
    assert model.node_state(node, claim) == state


def test_row_sums_active_pods_and_prices_the_offering() -> None:
    """Requested CPU/memory and the pod count sum the node's active pods; the price is the
    catalogue's price of the node's (type, zone, capacity type) offering."""
    pods = [
        b.bound("n1", cpu="500m", memory="1Gi"),
        b.bound("n1", cpu="250m", memory="512Mi"),
        b.bound("n1", cpu="4", memory="1Gi", phase="Succeeded"),  # terminal: not counted
    ]
    prices = model.price_book(b.catalog())
    r = model.row(model.NodeInput(_node(capacity_type="spot"), _claim(), pods), prices)
    assert (r.cpu_requested, r.memory_requested, r.pods) == (750, 1536 * 2**20 * 1000, 2)
    assert r.cpu_allocatable == M2.allocatable["cpu"]
    assert r.price == pytest.approx(0.09)
    assert (r.nodepool, r.instance_type, r.capacity_type, r.zone) == (
        "default",
        "m-2x",
        "spot",
        "zone-a",
    )
    assert r.created == NOW - 700  # the claim's creation: when the node was asked for


@pytest.mark.parametrize(
    ("itype", "zone", "ctype", "price"),
    [
        pytest.param("m-2x", "zone-b", "on-demand", 0.18, id="offering"),
        pytest.param("m-2x", "zone-z", "on-demand", 0.18, id="unknown-zone-uses-type"),
        pytest.param("m-2x", "zone-a", "reserved", None, id="no-such-capacity-type"),
        pytest.param("x-9", "zone-a", "on-demand", None, id="unknown-type"),
    ],
)
def test_price_book(itype: str, zone: str, ctype: str, price: float | None) -> None:
    """Prices come from the catalogue; an unknown offering falls back to the type's price for
    the capacity type, and otherwise is unknown (shown as ?)."""
    found = model.price_book(b.catalog()).price(itype, zone, ctype)
    assert found == (pytest.approx(price) if price is not None else None)


def _row(name: str, pool: str, price: float | None, cpu: int, pods: int = 1) -> model.Row:
    return model.Row(
        name, pool, "m-2x", "on-demand", "zone-a", NOW, model.INITIALIZED, "",
        cpu, 2000, 2**30 * 1000, 2**32 * 1000, pods, price,
    )  # fmt: skip


ROWS = [
    _row("a", "general", 0.10, 500),
    _row("b", "general", 0.20, 1500, pods=3),
    _row("c", "gpu", None, 1000, pods=2),
]


def test_totals_and_subtotals() -> None:
    """Totals sum nodes, pods, price (unpriced nodes counted apart) and utilisation; a month is
    730 hours; subtotals group by NodePool."""
    t = model.totals(ROWS)
    assert (t.nodes, t.pods, t.unpriced) == (3, 6, 1)
    assert t.price == pytest.approx(0.30)
    assert t.monthly == pytest.approx(219.0)
    assert t.cpu_utilisation == pytest.approx(3000 / 6000)
    assert t.memory_utilisation == pytest.approx(0.25)
    groups = model.subtotals(ROWS)
    assert [(n, g.nodes, round(g.price, 2)) for n, g in groups] == [
        ("general", 2, 0.30),
        ("gpu", 1, 0.0),
    ]


@pytest.mark.parametrize(
    ("key", "needle", "names"),
    [
        pytest.param("name", "", ["a", "b", "c"], id="name"),
        pytest.param("price", "", ["b", "a", "c"], id="price-dearest-first"),
        pytest.param("cpu", "", ["b", "c", "a"], id="cpu-fullest-first"),
        pytest.param("pods", "", ["b", "c", "a"], id="pods"),
        pytest.param("name", "GPU", ["c"], id="filter-case-insensitive"),
        pytest.param("price", "general", ["b", "a"], id="filter-then-sort"),
        pytest.param("bogus", "", ["a", "b", "c"], id="unknown-key-by-name"),
    ],
)
def test_arrange(key: str, needle: str, names: list[str]) -> None:
    """Rows are filtered by substring and sorted by the chosen key, ties by name."""
    assert [r.name for r in model.arrange(ROWS, key, needle)] == names


@pytest.mark.parametrize(
    ("text", "labels", "match"),
    [
        pytest.param("a=1", {"a": "1"}, True, id="eq"),
        pytest.param("a==1", {"a": "2"}, False, id="eqeq"),
        pytest.param("a!=1", {"a": "2"}, True, id="neq"),
        pytest.param("a", {}, False, id="exists"),
        pytest.param("!a", {}, True, id="not-exists"),
        pytest.param("a=1, b", {"a": "1", "b": ""}, True, id="and"),
        pytest.param("", {}, True, id="empty"),
    ],
)
def test_selector(text: str, labels: dict[str, str], match: bool) -> None:
    """--selector takes kubectl's equality and existence terms."""
    assert selector.parse_selector(text).matches(labels) is match


def test_selector_rejects_set_terms() -> None:
    """Set-based terms are refused with a message naming the term."""
    with pytest.raises(selector.SelectorError, match="env in"):
        selector.parse_selector("env in (a,b)")


def test_pending_oldest_first_with_reasons() -> None:
    """Pending pods are listed oldest first, each with its reason or the waiting text."""
    old = replace(b.pod("old"), creation=NOW - 100)
    new = replace(b.pod("new"), creation=NOW - 5)
    rows = model.pending([new, old], {"default/new": "no instance type has 200 cpu"}, NOW, "wait")
    assert [(p.key, p.reason, p.age_s) for p in rows] == [
        ("default/old", "wait", 100.0),
        ("default/new", "no instance type has 200 cpu", 5.0),
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "5s"), (119, "119s"), (600, "10m"), (7199, "119m"), (7200, "2h"), (3 * 86400, "3d")],
)
def test_age(seconds: float, text: str) -> None:
    """Ages read as kubectl prints them."""
    assert model.age(seconds) == text
