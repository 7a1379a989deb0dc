"""The viewer's screen: a model frame and the UI state drawn as rich renderables.

A thin view: every number comes from ``model``; this module only lays it out. Only the rows
that fit on the screen are built, so drawing costs the same at 20 nodes or 2000.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.text import Text

from karpenter.core.model.quantity import format_decimal
from karpenter.viewer import model
from karpenter.viewer.keys import Ui

BAR_WIDTH = 10
MAX_PENDING_SHOWN = 8


@dataclass(frozen=True, slots=True)
class Frame:
    """What the screen shows at one moment (already filtered by NodePool and selector)."""

    rows: Sequence[model.Row]
    pending: Sequence[model.Pending]
    now: float
    server: str = ""
    synced: bool = True
    pods: int | None = None


def bar(part: int, whole: int, width: int = BAR_WIDTH) -> str:
    """``████░░░░░░`` for part/whole (empty without capacity)."""
    ratio = min(part / whole, 1.0) if whole > 0 else 0.0
    filled = round(ratio * width)
    return "█" * filled + "░" * (width - filled)


def money(value: float | None, digits: int = 4) -> str:
    """``$0.1234`` (``?`` when the catalogue has no price)."""
    return "?" if value is None else f"${value:,.{digits}f}"


def percent(ratio: float) -> str:
    """``45%``."""
    return f"{ratio * 100:.0f}%"


def cpu(milli: int) -> str:
    """Cores, as few digits as needed (``1.5``)."""
    return format_decimal(milli, "cpu")


def memory(milli: int) -> str:
    """Memory in GiB (``7.5Gi``)."""
    return format_decimal(milli, "memory")


def header(frame: Frame, totals: model.Totals, pending: int) -> str:
    """The totals line."""
    unpriced = f" (+{totals.unpriced} unpriced)" if totals.unpriced else ""
    sync = "" if frame.synced else "  (syncing)"
    return (
        f"karpenter viewer {frame.server}{sync}\n"
        f"nodes {totals.nodes}  pods {totals.pods}  pending {pending}  "
        f"{money(totals.price)}/hour  {money(totals.monthly, 2)}/month{unpriced}  "
        f"cpu {percent(totals.cpu_utilisation)} "
        f"({cpu(totals.cpu_requested)}/{cpu(totals.cpu_allocatable)})  "
        f"memory {percent(totals.memory_utilisation)} "
        f"({memory(totals.memory_requested)}/{memory(totals.memory_allocatable)})"
    )


def subtotal_lines(groups: Sequence[tuple[str, model.Totals]]) -> list[str]:
    """One line per NodePool."""
    return [
        f"  {name or '(no nodepool)'}: {t.nodes} nodes, {t.pods} pods, {money(t.price)}/hour, "
        f"cpu {percent(t.cpu_utilisation)}, memory {percent(t.memory_utilisation)}"
        for name, t in groups
    ]


def _state(r: model.Row) -> str:
    return f"{r.state} ({r.reason})" if r.reason else r.state


NODE_COLUMNS = (
    "NODE", "NODEPOOL", "TYPE", "CAPACITY", "ZONE", "AGE", "STATE", "CPU", "MEMORY", "PODS",
    "$/HOUR",
)  # fmt: skip
_RIGHT = frozenset({"PODS", "$/HOUR"})


def columns(heads: Sequence[str], cells: Sequence[Sequence[str]], right: frozenset[str]) -> str:
    """Plain aligned columns, two spaces apart (a rich Table costs ~1 ms per row to lay out;
    this is the same picture for a few microseconds)."""
    widths = [len(h) for h in heads]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(row: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if h in right else c.ljust(w)
            for h, c, w in zip(heads, row, widths, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(heads), *(line(r) for r in cells)])


def node_cells(r: model.Row, now: float) -> list[str]:
    """One node row's cells, in ``NODE_COLUMNS`` order."""
    return [
        r.name,
        r.nodepool or "-",
        r.instance_type or "-",
        r.capacity_type or "-",
        r.zone or "-",
        model.age(now - r.created) if r.created else "-",
        _state(r),
        f"{bar(r.cpu_requested, r.cpu_allocatable)} "
        f"{cpu(r.cpu_requested)}/{cpu(r.cpu_allocatable)}",
        f"{bar(r.memory_requested, r.memory_allocatable)} "
        f"{memory(r.memory_requested)}/{memory(r.memory_allocatable)}",
        str(r.pods),
        money(r.price),
    ]


def node_table(rows: Sequence[model.Row], now: float) -> Text:
    """The visible node rows."""
    text = Text(columns(NODE_COLUMNS, [node_cells(r, now) for r in rows], _RIGHT))
    text.no_wrap = True
    text.overflow = "ellipsis"
    text.stylize("bold", 0, text.plain.find("\n") if rows else len(text.plain))
    return text


def pending_table(pending: Sequence[model.Pending]) -> Text:
    """The oldest pending pods and their reasons (long reasons wrap)."""
    heads = ("PENDING POD", "CPU", "MEMORY", "AGE", "REASON")
    cells = [
        [p.key, cpu(p.cpu), memory(p.memory), model.age(p.age_s), p.reason]
        for p in pending[:MAX_PENDING_SHOWN]
    ]
    text = Text(columns(heads, cells, frozenset()))
    text.overflow = "fold"
    return text


def chrome_lines(groups: int, pending: int) -> int:
    """Lines taken by everything but the node rows (header, subtotals, headings, footer)."""
    pending_lines = 0 if not pending else 2 + min(pending, MAX_PENDING_SHOWN) * 2
    return 2 + groups + 1 + 1 + pending_lines + 1


def page_size(height: int, groups: int, pending: int) -> int:
    """How many node rows fit."""
    return max(height - chrome_lines(groups, pending), 1)


def footer(ui: Ui, first: int, shown: int, total: int) -> str:
    """Sort, filter, position and the keys."""
    needle = f"{ui.needle}_" if ui.typing else (ui.needle or "-")
    span = f"{first + 1}-{first + shown}" if shown else "0"
    return (
        f"sort: {ui.sort} [s/S]  filter: {needle} [/ Esc]  rows {span} of {total} "
        "[↑↓ PgUp PgDn g G]  quit [q]"
    )


def render(frame: Frame, ui: Ui, height: int) -> tuple[RenderableType, int, int]:
    """The screen, the page size and the number of rows matching the filter."""
    groups = model.subtotals(frame.rows)
    totals = model.totals(frame.rows, frame.pods)
    arranged = model.arrange(frame.rows, ui.sort, ui.needle)
    page = page_size(height, len(groups), len(frame.pending))
    offset = min(ui.offset, max(len(arranged) - page, 0))
    visible = arranged[offset : offset + page]
    parts: list[RenderableType] = [
        Text(header(frame, totals, len(frame.pending))),
        Text("\n".join(subtotal_lines(groups))),
        node_table(visible, frame.now),
    ]
    if frame.pending:
        more = len(frame.pending) - MAX_PENDING_SHOWN
        hidden = f" ({more} not shown)" if more > 0 else ""
        parts.append(Text(f"\n{len(frame.pending)} pending{hidden}"))
        parts.append(pending_table(frame.pending))
    parts.append(Text(footer(ui, offset, len(visible), len(arranged))))
    return Group(*parts), page, len(arranged)
