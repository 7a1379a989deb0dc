"""The viewer's screen drawn into a fixed-size console: what a person reads."""

from __future__ import annotations

import io

from rich.console import Console

from karpenter.viewer import model, screen
from karpenter.viewer.keys import Ui

NOW = 1_000_000.0


def _row(name: str, pool: str = "default", price: float | None = 0.1) -> model.Row:
    return model.Row(
        name, pool, "m-2x", "spot", "zone-a", NOW - 300, model.DISRUPTING, "Underutilized",
        1000, 2000, 2 * 2**30 * 1000, 8 * 2**30 * 1000, 3, price,
    )  # fmt: skip


def _text(frame: screen.Frame, ui: Ui, height: int = 30) -> tuple[str, int, int]:
    console = Console(file=io.StringIO(), width=160, height=height, record=True)
    renderable, page, total = screen.render(frame, ui, height)
    console.print(renderable)
    return console.export_text(), page, total


def test_header_rows_and_pending() -> None:
    """The header shows totals and $/month, each row its bars, state with reason and price,
    and pending pods their reasons."""
    pending = [model.Pending("ml/trainer", 8000, 0, 42.0, "NodePool gpu: limits cpu=8 exceeded")]
    text, _, _ = _text(screen.Frame([_row("n1"), _row("n2")], pending, NOW), Ui())
    assert "nodes 2  pods 6  pending 1  $0.2000/hour  $146.00/month" in text
    assert "cpu 50% (2/4)" in text and "memory 25% (4Gi/16Gi)" in text
    assert "default: 2 nodes, 6 pods, $0.2000/hour" in text
    line = next(x for x in text.splitlines() if x.startswith("n1 "))
    for cell in ("default", "m-2x", "spot", "zone-a", "5m", "disrupting (Underutilized)",
                 "█████░░░░░ 1/2", "██░░░░░░░░ 2Gi/8Gi", "$0.1000"):  # fmt: skip
        assert cell in line
    line = next(x for x in text.splitlines() if x.startswith("ml/trainer"))
    assert line.split() == [
        "ml/trainer",
        "8",
        "0Gi",
        "42s",
        *"NodePool gpu: limits cpu=8 exceeded".split(),
    ]


def test_only_a_page_of_rows_is_drawn() -> None:
    """With 2000 rows only those that fit are drawn, and the footer says which."""
    rows = [_row(f"node-{i:04d}") for i in range(2000)]
    text, page, total = _text(screen.Frame(rows, [], NOW), Ui(offset=100), height=30)
    drawn = [x for x in text.splitlines() if x.startswith("node-")]
    assert total == 2000
    assert len(drawn) == page == 30 - screen.chrome_lines(1, 0)
    assert drawn[0].startswith("node-0100")
    assert f"rows 101-{100 + page} of 2000" in text


def test_unpriced_nodes_are_counted_apart() -> None:
    """A node the catalogue cannot price shows ? and the header counts it."""
    text, _, _ = _text(screen.Frame([_row("n1", price=None)], [], NOW), Ui())
    assert "(+1 unpriced)" in text
    line = next(x for x in text.splitlines() if x.startswith("n1 "))
    assert line.rstrip().endswith("?")
