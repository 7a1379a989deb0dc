"""Reading scenario text into raw documents: JSON, and YAML as PyYAML reads it, fast.

Text that starts with ``{`` or ``[`` is read as JSON by the standard library: one value, or a
stream of values (``kubectl get -o json`` prints one ``kind: List`` object; concatenated outputs
are a stream). Text that is not JSON is YAML.

For YAML, PyYAML's reading (YAML 1.1, safe schema) is the contract: its values, and its error
messages, which the CLI prints. PyYAML builds every value in Python, which takes about 15 s for
100,000 pods; yaml-rs (a YAML 1.2 reader in Rust) takes under 2 s. The two read most text alike
but not all: YAML 1.1 resolves ``yes``/``on``, ``010`` (octal), ``1_000``, ``1:20``, timestamps
and merge keys where YAML 1.2 reads strings (and ``1e3``, ``0o7`` the other way), and yaml-rs
accepts a few things PyYAML refuses (collections as keys). So yaml-rs reads a text only when a
conservative scan finds nothing of that kind anywhere in it (any plain token that either schema
could resolve differently, escapes, anchors, aliases, tags, directives, ``...``, tabs, CRs,
characters PyYAML refuses) and its reading succeeds; otherwise PyYAML reads the whole text. The
scan may refuse text that both would read alike (a comment saying "on"), never the reverse;
``tests/simulate/test_documents.py`` checks the two readings against each other.

yaml-rs reads one document at a time (split at ``---`` lines, which no document can contain),
so a lone list document is never mistaken for a stream of documents.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
import yaml_rs

_PYYAML: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Plain tokens (after a separator, before a separator or ": ") that YAML 1.1 or 1.2 could read
# as something other than a string, except those both read the same way.
_SEP = r"[\s,\[\]{}]"
_END = r"(?=[\s,\[\]{}]|:(?:\s|\Z)|\Z)"
_WORDS = r"(?:y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)"
# yaml-rs reads underscores anywhere in a number ("_0" is 0), so the pattern is generous.
_NUMBER = (
    r"[-+]?(?:[0-9_]*0[xXoObB][0-9a-fA-F_]+"
    r"|[0-9_.]*[0-9][0-9_.]*(?::[0-9_.]+)*(?:[eE][-+]?[0-9_]+)?"
    r"|\.(?i:inf|nan))"
)
_AGREED = r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]+)?"  # decimal ints and plain floats
_HAZARD = re.compile(
    r"[\\\t\r\x85\u2028\u2029\ufeff]"  # escapes; tabs, CRs and line breaks only 1.1 has
    r"|[^\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"  # PyYAML refuses these
    r"|\n(?:%|\.\.\.(?:\s|\Z)| *(?:--- *)?[|>])"  # directives, ends, block scalar roots
    # block scalars other than plain literal ones (| and |-): folding and keep-chomping
    rf"|{_SEP}(?:>|\|(?!-? *(?:#[^\n]*)?(?:\n|\Z)))"
    r"|[\]}] *:(?:\s|\Z)|:[,\[\]{}]"  # a flow collection as a key; ":" before one
    rf"|{_SEP}(?::(?:\s|\Z)"  # an empty key
    r"|[&*!]|[0-9]{4}-[0-9][0-9]?-[0-9][0-9]?"  # anchors, aliases, tags, dates
    rf"|(?:<<|\?|=|{_WORDS}){_END}"
    rf"|(?!{_AGREED}{_END}){_NUMBER}{_END})"
)
_LITERAL = re.compile(r" \|-? *(?:#[^\n]*)?\n")
_BLANK_LINE = re.compile(r"\n +(?:\n|\Z)")
# With literal block scalars, a line of spaces, a last line without its line break, or a
# literal whose next line is not its content (indented two more than its key line) read
# differently: "" or no final line break in PyYAML, "\n" in yaml-rs.
_EMPTY_LITERAL = re.compile(r"^( *)[^\n]* \|-? *(?:#[^\n]*)?\n(?!\1  +[^ \n])", re.MULTILINE)
_ONES = str.maketrans("23456789", "11111111")
_MARKER = re.compile(r"^---(?= |\n|\Z)", re.MULTILINE)
_JSON_START = re.compile(r"[ \t\r\n]*[\[{]")
_BLANK = re.compile(r"[ \t\r\n]*")


def read(text: str) -> list[Any]:
    """Every document of ``text`` (``None`` for empty ones); raises ``yaml.YAMLError``."""
    if _JSON_START.match(text):
        docs = _json(text)
        if docs is not None:
            return docs
    docs = None if hazard(text) else fast_yaml(text)
    if docs is not None:
        return docs
    return list(yaml.load_all(text, Loader=_PYYAML))


def _json(text: str) -> list[Any] | None:
    decoder = json.JSONDecoder()
    docs = []
    end = len(text)
    pos = _skip_blank(text, 0)
    try:
        while pos < end:
            doc, pos = decoder.raw_decode(text, pos)
            docs.append(doc)
            pos = _skip_blank(text, pos)
    except json.JSONDecodeError:
        return None  # not JSON after all: YAML (a flow mapping, or an error to report)
    return docs


def _skip_blank(text: str, pos: int) -> int:
    blank = _BLANK.match(text, pos)
    return blank.end() if blank else pos


def hazard(text: str) -> bool:
    """Whether the text holds anything PyYAML and yaml-rs might read differently."""
    # The scan tells digits apart only as 0 and 1-9, so with 2-9 written as 1, names, uids
    # and timestamps repeat: the distinct lines of 100,000 pods are a few kilobytes.
    distinct = set(text.translate(_ONES).split("\n"))
    lines = "\n" + "\n".join(sorted(distinct))
    if _HAZARD.search(lines):
        return True
    if _LITERAL.search(lines) is None:
        return False
    return (
        not text.endswith("\n")
        or _BLANK_LINE.search(lines) is not None
        or _EMPTY_LITERAL.search(text) is not None
    )


def fast_yaml(text: str) -> list[Any] | None:
    """yaml-rs's reading, document by document (None where it fails or might mislead)."""
    bounds = [0, *(m.start() for m in _MARKER.finditer(text)), len(text)]
    docs = []
    policy = yaml_rs.DuplicateKeyPolicy.LastWins  # as PyYAML: the last value of a key wins
    for index in range(len(bounds) - 1):
        chunk = text[bounds[index] : bounds[index + 1]]
        try:
            doc = yaml_rs.loads(chunk, parse_datetime=False, duplicate_key_policy=policy)
        except (ValueError, TypeError, RecursionError):  # TypeError: a mapping as a key
            return None  # PyYAML reads it, or says what is wrong in its own words
        if index == 0 and doc is None:
            if _content(chunk):
                return None  # a null first document: rare, and PyYAML's to tell apart
            continue  # comments before the first "---" are no document
        docs.append(doc)
    return docs


def _content(chunk: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in chunk.split("\n"))
