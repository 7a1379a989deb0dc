"""``karpenter viewer --selector``: kubectl's short label-selector form, parsed and matched.

Equality (``k=v``, ``k==v``, ``k!=v``) and existence (``k``, ``!k``) terms, comma-separated,
all of which must hold; set-based terms (``k in (a,b)``) are refused with the term named.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector in kubectl's short form: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``."""

    terms: tuple[tuple[str, str, str], ...] = ()  # (key, op, value), op in = != exists !exists

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every term holds for ``labels``."""
        for key, op, value in self.terms:
            have = labels.get(key)
            if (
                (op == "=" and have != value)
                or (op == "!=" and have == value)
                or (op == "exists" and have is None)
                or (op == "!exists" and have is not None)
            ):
                return False
        return True


class SelectorError(ValueError):
    """A selector term that does not parse."""


def parse_selector(text: str) -> Selector:
    """Parse ``--selector`` (comma-separated terms; set-based ``in (...)`` is not supported)."""
    terms = []
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        if "!=" in raw:
            key, _, value = raw.partition("!=")
            terms.append((key.strip(), "!=", value.strip()))
        elif "=" in raw:
            key, _, value = raw.replace("==", "=").partition("=")
            terms.append((key.strip(), "=", value.strip()))
        elif raw.startswith("!"):
            terms.append((raw[1:].strip(), "!exists", ""))
        else:
            terms.append((raw, "exists", ""))
        if not terms[-1][0] or " " in terms[-1][0] or "(" in raw:
            raise SelectorError(f"--selector: cannot parse {raw!r} (use k=v, k!=v, k or !k)")
    return Selector(tuple(terms))
