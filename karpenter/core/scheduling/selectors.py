"""Label selectors (matchLabels + matchExpressions) as used by affinity, spread and PDBs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SelectorExpression:
    """One ``matchExpressions`` entry: In, NotIn, Exists or DoesNotExist."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes LabelSelectorRequirement semantics."""
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A label selector; ``None`` where a selector is optional means "matches nothing"."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorExpression, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every term matches (an empty selector matches everything)."""
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(expr.matches(labels) for expr in self.match_expressions)

    def with_labels(self, extra: Mapping[str, str]) -> LabelSelector:
        """A copy that also requires ``extra`` (used for matchLabelKeys)."""
        merged = dict(self.match_labels)
        merged.update(extra)
        return LabelSelector(tuple(sorted(merged.items())), self.match_expressions)
