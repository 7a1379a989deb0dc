"""The viewer's keyboard: bytes from the terminal into keys, keys into the next UI state.

Pure (the terminal reading lives in ``app``). Keys: ``q`` quits (Ctrl-C too), ``s``/``S``
cycle the sort key forwards/backwards, ``/`` starts a filter (typed text, Backspace, Enter
keeps it, Esc clears it), arrows or ``j``/``k`` scroll a row, PgUp/PgDn a page, ``g``/``G``
jump to the top/bottom.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from karpenter.viewer.model import SORT_KEYS

UP, DOWN, PAGE_UP, PAGE_DOWN, HOME, END = "up", "down", "pgup", "pgdn", "home", "end"
ENTER, ESCAPE, BACKSPACE, INTERRUPT = "enter", "esc", "backspace", "ctrl-c"

_SEQUENCES = {
    "\x1b[A": UP,
    "\x1b[B": DOWN,
    "\x1b[5~": PAGE_UP,
    "\x1b[6~": PAGE_DOWN,
    "\x1b[H": HOME,
    "\x1b[F": END,
    "\x1b[1~": HOME,
    "\x1b[4~": END,
}
_SINGLE = {"\r": ENTER, "\n": ENTER, "\x7f": BACKSPACE, "\x08": BACKSPACE, "\x03": INTERRUPT}


def tokens(data: str) -> list[str]:
    """Split terminal input into keys (escape sequences become names; a lone ESC is ``esc``)."""
    out: list[str] = []
    i = 0
    while i < len(data):
        ch = data[i]
        if ch == "\x1b" and data[i + 1 : i + 2] == "[":
            j = i + 2
            while j < len(data) and not (data[j].isalpha() or data[j] == "~"):
                j += 1
            seq = data[i : j + 1]
            out.append(_SEQUENCES.get(seq, seq))
            i = j + 1
            continue
        out.append(ESCAPE if ch == "\x1b" else _SINGLE.get(ch, ch))
        i += 1
    return out


@dataclass(frozen=True, slots=True)
class Ui:
    """What the person chose: sort key, filter text (and whether it is being typed), scroll."""

    sort: str = "name"
    needle: str = ""
    typing: bool = False
    offset: int = 0
    quit: bool = False


def _cycle(sort: str, step: int) -> str:
    index = SORT_KEYS.index(sort) if sort in SORT_KEYS else 0
    return SORT_KEYS[(index + step) % len(SORT_KEYS)]


def _typing(ui: Ui, key: str) -> Ui:
    if key == ENTER:
        return replace(ui, typing=False)
    if key == ESCAPE:
        return replace(ui, typing=False, needle="", offset=0)
    if key == BACKSPACE:
        return replace(ui, needle=ui.needle[:-1], offset=0)
    if len(key) == 1 and key.isprintable():
        return replace(ui, needle=ui.needle + key, offset=0)
    return ui


def handle(ui: Ui, key: str, page: int, total: int) -> Ui:
    """The UI after ``key``; ``page`` rows fit on screen, ``total`` rows match the filter."""
    if key == INTERRUPT:
        return replace(ui, quit=True)
    if ui.typing:
        return _typing(ui, key)
    last = max(total - page, 0)
    moves = {
        UP: ui.offset - 1,
        "k": ui.offset - 1,
        DOWN: ui.offset + 1,
        "j": ui.offset + 1,
        PAGE_UP: ui.offset - page,
        PAGE_DOWN: ui.offset + page,
        HOME: 0,
        "g": 0,
        END: last,
        "G": last,
    }
    if key in moves:
        return replace(ui, offset=min(max(moves[key], 0), last))
    if key in ("q", "Q"):
        return replace(ui, quit=True)
    if key in ("s", "S"):
        return replace(ui, sort=_cycle(ui.sort, 1 if key == "s" else -1), offset=0)
    if key == "/":
        return replace(ui, typing=True)
    if key == ESCAPE:
        return replace(ui, needle="", offset=0)
    return ui
