"""The viewer's keyboard: terminal bytes into keys, keys into UI states."""

from __future__ import annotations

import pytest

from karpenter.viewer import keys
from karpenter.viewer.keys import Ui


def test_tokens() -> None:
    """Escape sequences become named keys; a lone ESC is esc; Enter and Backspace are named."""
    assert keys.tokens("q\x1b[A\x1b[6~/x\r\x7f\x1b") == [
        "q", keys.UP, keys.PAGE_DOWN, "/", "x", keys.ENTER, keys.BACKSPACE, keys.ESCAPE,
    ]  # fmt: skip


def _press(*typed: str, page: int = 10, total: int = 100) -> Ui:
    ui = Ui()
    for key in typed:
        ui = keys.handle(ui, key, page, total)
    return ui


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        pytest.param(("q",), Ui(quit=True), id="q-quits"),
        pytest.param((keys.INTERRUPT,), Ui(quit=True), id="ctrl-c-quits"),
        pytest.param(("s",), Ui(sort="nodepool"), id="s-next-sort"),
        pytest.param(("S",), Ui(sort="price"), id="S-previous-sort"),
        pytest.param(("/", "g", "p", "u", keys.ENTER), Ui(needle="gpu"), id="filter"),
        pytest.param(("/", "q", keys.ENTER), Ui(needle="q"), id="q-while-typing-is-text"),
        pytest.param(("/", "a", "b", keys.BACKSPACE), Ui(needle="a", typing=True), id="backspace"),
        pytest.param(("/", "a", keys.ENTER, keys.ESCAPE), Ui(), id="esc-clears"),
        pytest.param((keys.DOWN, "j"), Ui(offset=2), id="down"),
        pytest.param((keys.UP,), Ui(), id="up-stops-at-top"),
        pytest.param((keys.PAGE_DOWN,), Ui(offset=10), id="page-down"),
        pytest.param(("G",), Ui(offset=90), id="end"),
        pytest.param(("G", "g"), Ui(), id="home"),
        pytest.param(("G", keys.PAGE_DOWN), Ui(offset=90), id="stops-at-last-page"),
        pytest.param(("j", "s"), Ui(sort="nodepool"), id="sorting-scrolls-to-top"),
        pytest.param(("x",), Ui(), id="unknown-key-ignored"),
    ],
)
def test_handle(typed: tuple[str, ...], expected: Ui) -> None:
    """Each key moves the UI to the documented state."""
    assert _press(*typed) == expected
