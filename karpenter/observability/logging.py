"""Logging: one structlog pipeline for our logs and for every library's stdlib logging.

``configure_logging`` is called once by the entry point. Our code logs through structlog
(``get_logger``) and libraries (aiohttp, kubernetes_asyncio, botocore) log through stdlib
``logging``; both end in the same handler and renderer, so one process writes one format. The
JSON form uses upstream's zap keys (``level`` upper-case, ``time`` ISO-8601 UTC, ``logger``,
``message``) so log queries written for upstream Karpenter still match.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

import structlog

if TYPE_CHECKING:
    from structlog.typing import EventDict, Processor, WrappedLogger

# upstream accepts debug, info and error (empty means info); warning is ours, for libraries
LEVELS = {"": logging.INFO, "debug": logging.DEBUG, "info": logging.INFO,
          "warning": logging.WARNING, "error": logging.ERROR}  # fmt: skip

# libraries that log at info on every request; at info they would drown the controller's lines
_CHATTY = ("aiohttp.access", "botocore", "aiobotocore", "urllib3")


def _upper_level(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    # zap writes INFO/ERROR; structlog's add_log_level writes lower case
    if "level" in event_dict:
        event_dict["level"] = str(event_dict["level"]).upper()
    return event_dict


def _shared_processors(json_output: bool) -> list[Processor]:
    processors: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
        structlog.processors.StackInfoRenderer(),
    ]
    if json_output:
        processors += [_upper_level, structlog.processors.format_exc_info]
    return processors


def sinks_are_terminals(
    output_paths: Sequence[str], streams: Mapping[str, TextIO] | None = None
) -> bool:
    """Whether every LOG_OUTPUT_PATHS sink is a terminal (``stdout``/``stderr`` on a TTY)."""
    named = streams if streams is not None else {"stdout": sys.stdout, "stderr": sys.stderr}
    if not output_paths:
        return False
    for path in output_paths:
        stream = named.get(path)
        if stream is None or not stream.isatty():
            return False
    return True


def _handlers(output_paths: Sequence[str], stream: TextIO | None) -> list[logging.Handler]:
    if stream is not None:
        return [logging.StreamHandler(stream)]
    handlers: list[logging.Handler] = []
    for path in output_paths:
        if path in ("stdout", "stderr"):
            handlers.append(logging.StreamHandler(getattr(sys, path)))
        else:
            handlers.append(logging.FileHandler(path, encoding="utf-8"))
    return handlers


def configure_logging(
    level: str,
    json_output: bool,
    *,
    output_paths: Sequence[str] = ("stdout",),
    stream: TextIO | None = None,
) -> None:
    """Route structlog and stdlib logging at ``level`` (LOG_LEVEL) to every sink.

    ``output_paths`` are LOG_OUTPUT_PATHS: ``stdout``, ``stderr`` or file paths (appended to).
    ``stream``, when given, replaces them all (tests).
    """
    try:
        threshold = LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"LOG_LEVEL: invalid level {level!r} (debug, info or error)") from None
    shared = _shared_processors(json_output)
    renderer: Processor
    if json_output:
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        final: list[Processor] = [structlog.processors.EventRenamer("message"), renderer]
    else:
        final = [structlog.dev.ConsoleRenderer(colors=False)]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
    )
    handlers = _handlers(output_paths, stream)
    root = logging.getLogger()
    # replacing (not adding) handlers keeps a second call from writing every line twice
    for old in list(root.handlers):
        root.removeHandler(old)
        if isinstance(old, logging.FileHandler):
            old.close()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(threshold)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(threshold, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger named ``name`` (shown as ``logger``); bind per-object context on it."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger
