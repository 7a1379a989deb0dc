"""Logging: our logs and libraries' stdlib logs come out as one format at LOG_LEVEL."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import structlog

from karpenter.observability.logging import configure_logging, get_logger, sinks_are_terminals
from karpenter.settings import Settings


@pytest.fixture
def out() -> Iterator[io.StringIO]:
    """A stream to log into; logging's process-wide setup is restored afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield io.StringIO()
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_use_upstream_keys(out: io.StringIO) -> None:
    """A JSON line has upper-case level, ISO UTC time, logger name, message and bound context."""
    configure_logging("info", True, stream=out)
    get_logger("controller.provisioner").bind(nodepool="default").info("found provisionable pods")
    [line] = _lines(out)
    assert line["level"] == "INFO"
    assert line["logger"] == "controller.provisioner"
    assert line["message"] == "found provisionable pods"
    assert line["nodepool"] == "default"
    assert datetime.fromisoformat(line["time"].replace("Z", "+00:00")).utcoffset() is not None


def test_stdlib_library_logs_are_routed(out: io.StringIO) -> None:
    """A library's stdlib warning is rendered as the same JSON, with %-args formatted."""
    configure_logging("info", True, stream=out)
    logging.getLogger("kubernetes_asyncio.watch").warning("watch %s expired", "pods")
    [line] = _lines(out)
    assert (line["level"], line["logger"]) == ("WARNING", "kubernetes_asyncio.watch")
    assert line["message"] == "watch pods expired"


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        pytest.param("debug", ["DEBUG", "INFO", "ERROR"], id="debug"),
        pytest.param("info", ["INFO", "ERROR"], id="info"),
        pytest.param("", ["INFO", "ERROR"], id="empty-is-info"),
        pytest.param("error", ["ERROR"], id="error"),
    ],
)
def test_level_filters(out: io.StringIO, level: str, expected: list[str]) -> None:
    """Lines below LOG_LEVEL are dropped, for structlog and stdlib loggers alike."""
    configure_logging(level, True, stream=out)
    log = get_logger("t")
    log.debug("d")
    log.info("i")
    logging.getLogger("lib").error("e")
    assert [line["level"] for line in _lines(out)] == expected


def test_invalid_level_names_the_variable(out: io.StringIO) -> None:
    """An unknown level fails with LOG_LEVEL in the message."""
    with pytest.raises(ValueError, match="LOG_LEVEL"):
        configure_logging("trace", True, stream=out)


def test_exceptions_are_rendered(out: io.StringIO) -> None:
    """log.exception puts the traceback on the JSON line."""
    configure_logging("info", True, stream=out)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        get_logger("t").exception("launch failed")
    [line] = _lines(out)
    assert line["level"] == "ERROR"
    assert "RuntimeError: boom" in line["exception"]


def test_console_output_is_human(out: io.StringIO) -> None:
    """Without JSON the line is console text naming the event, logger and context."""
    configure_logging("info", False, stream=out)
    get_logger("controller.disruption").info("disrupting node", node="ip-10-0-0-1")
    text = out.getvalue()
    assert "disrupting node" in text
    assert "controller.disruption" in text
    assert "node=ip-10-0-0-1" in text
    assert not text.lstrip().startswith("{")


def test_reconfiguring_does_not_duplicate(out: io.StringIO) -> None:
    """Calling configure_logging twice still writes each line once."""
    configure_logging("info", True, stream=out)
    configure_logging("info", True, stream=out)
    get_logger("t").info("once")
    assert len(_lines(out)) == 1


def test_capture_logs_sees_events() -> None:
    """structlog.testing.capture_logs captures get_logger's events for assertions."""
    with structlog.testing.capture_logs() as logs:
        get_logger("t").info("hello", key=1)
    assert logs == [{"event": "hello", "key": 1, "log_level": "info"}]


def test_output_paths_write_to_every_sink(
    out: io.StringIO, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LOG_OUTPUT_PATHS sends each line to stdout and to a file, appending to the file."""
    log_file = tmp_path / "karpenter.log"
    log_file.write_text("earlier\n")
    configure_logging("info", True, output_paths=["stdout", str(log_file)])
    get_logger("t").info("to both")
    logging.getLogger().handlers[-1].flush()
    file_lines = log_file.read_text().splitlines()
    assert file_lines[0] == "earlier"
    assert json.loads(file_lines[1])["message"] == "to both"
    assert json.loads(capsys.readouterr().out)["message"] == "to both"


@pytest.fixture
def terminal() -> Iterator[Any]:
    """The slave end of a real pseudo-terminal, as a text stream."""
    master, slave = pty.openpty()
    stream = os.fdopen(slave, "w")
    try:
        yield stream
    finally:
        stream.close()
        os.close(master)


def test_sinks_are_terminals(terminal: Any) -> None:
    """Logs count as read by a person only when every sink is a TTY."""
    pipe = io.StringIO()
    assert sinks_are_terminals(["stdout"], {"stdout": terminal, "stderr": pipe})
    assert sinks_are_terminals(["stderr", "stdout"], {"stdout": terminal, "stderr": terminal})
    assert not sinks_are_terminals(["stdout", "stderr"], {"stdout": terminal, "stderr": pipe})
    assert not sinks_are_terminals(["/var/log/k.log"], {"stdout": terminal})
    assert not sinks_are_terminals([], {"stdout": terminal})


@pytest.mark.parametrize(
    ("encoding", "terminal", "json_lines"),
    [
        pytest.param("", True, False, id="unset-terminal-console"),
        pytest.param("", False, True, id="unset-pipe-json"),
        pytest.param("json", True, True, id="json-wins"),
        pytest.param("console", False, False, id="console-wins"),
    ],
)
def test_log_encoding(
    monkeypatch: pytest.MonkeyPatch, encoding: str, terminal: bool, json_lines: bool
) -> None:
    """LOG_ENCODING decides when set; unset, a terminal gets console lines and anything else
    JSON."""
    monkeypatch.setenv("LOG_ENCODING", encoding)
    assert Settings().log_json_for(terminal=terminal) is json_lines


def test_the_controller_does_not_load_rich_through_structlog() -> None:
    """structlog would import rich (and pygments) for its console's tracebacks: the package
    root hides rich while structlog loads, so the controller never pays for it, and rich stays
    importable for the viewer."""
    code = (
        "import sys, karpenter.cli, karpenter.operator, structlog\n"
        "loaded = sorted(m for m in ('rich', 'pygments') if m in sys.modules)\n"
        "import rich.console\n"
        "print(loaded, structlog.dev.rich is None)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[] True"
