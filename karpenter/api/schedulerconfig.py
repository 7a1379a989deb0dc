"""The ``SCHEDULER_CONFIG`` document: the kube-scheduler's default topology spread constraints.

Operators whose kube-scheduler runs ``PodTopologySpread`` with ``defaultConstraints`` give
Karpenter the same list so that both spread pods alike. The document is YAML or JSON::

    podTopologySpread:
      defaultConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: ScheduleAnyway

Decoding is strict, as the kube-scheduler's own validation of these defaults is: unknown
fields are refused, ``labelSelector`` and ``matchLabelKeys`` are forbidden (the selector is
deduced per pod), and one (topologyKey, whenUnsatisfiable) pair may appear only once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from karpenter.api.crdfields import qualified_name_problem
from karpenter.api.errors import DecodeError
from karpenter.core.model.pod import DO_NOT_SCHEDULE, HONOR, IGNORE, SCHEDULE_ANYWAY, TopologySpread

_TOP = frozenset({"podTopologySpread"})
_SPREAD = frozenset({"defaultConstraints"})
_CONSTRAINT = frozenset(
    {
        "maxSkew",
        "topologyKey",
        "whenUnsatisfiable",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
    }
)
_FORBIDDEN = {
    "labelSelector": "not allowed in default constraints (the selector is deduced per pod)",
    "matchLabelKeys": "not allowed in default constraints",
}


def _object(value: Any, path: str, known: frozenset[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DecodeError(path, "must be an object")
    for key in value:
        if key in _FORBIDDEN:
            raise DecodeError(f"{path}.{key}" if path else str(key), _FORBIDDEN[key])
        if key not in known:
            where = f"{path}.{key}" if path else str(key)
            raise DecodeError(where, f"unknown field (expected one of {', '.join(sorted(known))})")
    return value


def _policy(obj: Mapping[str, Any], key: str, path: str, default: str) -> str:
    value = obj.get(key, default)
    if value not in (HONOR, IGNORE):
        raise DecodeError(f"{path}.{key}", f"invalid value {value!r} (Honor or Ignore)")
    return str(value)


def _constraint(value: Any, path: str) -> TopologySpread:
    obj = _object(value, path, _CONSTRAINT)
    skew = obj.get("maxSkew")
    if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
        raise DecodeError(f"{path}.maxSkew", "must be a positive integer")
    key = obj.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise DecodeError(f"{path}.topologyKey", "required")
    problem = qualified_name_problem(key)
    if problem:
        raise DecodeError(f"{path}.topologyKey", problem)
    when = obj.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise DecodeError(
            f"{path}.whenUnsatisfiable", f"invalid value {when!r} (DoNotSchedule or ScheduleAnyway)"
        )
    domains = obj.get("minDomains")
    if domains is not None and (
        isinstance(domains, bool) or not isinstance(domains, int) or domains < 1
    ):
        raise DecodeError(f"{path}.minDomains", "must be a positive integer")
    return TopologySpread(
        key,
        skew,
        str(when),
        None,
        domains,
        _policy(obj, "nodeAffinityPolicy", path, HONOR),
        _policy(obj, "nodeTaintsPolicy", path, IGNORE),
    )


def parse(text: str) -> tuple[TopologySpread, ...]:
    """The default constraints of a scheduler-config document (DecodeError names the field)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise DecodeError("", f"not YAML or JSON: {err}") from err
    top = _object(doc, "", _TOP)
    spread = _object(top.get("podTopologySpread"), "podTopologySpread", _SPREAD)
    path = "podTopologySpread.defaultConstraints"
    items = spread.get("defaultConstraints") or []
    if not isinstance(items, list):
        raise DecodeError(path, "must be a list")
    out: list[TopologySpread] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        constraint = _constraint(item, f"{path}[{i}]")
        pair = (constraint.topology_key, constraint.when_unsatisfiable)
        if pair in seen:
            raise DecodeError(
                f"{path}[{i}]",
                f"duplicate topologyKey {pair[0]!r} with whenUnsatisfiable {pair[1]!r}",
            )
        seen.add(pair)
        out.append(constraint)
    return tuple(out)


def load(path: str) -> tuple[TopologySpread, ...]:
    """Read and parse the file at ``path`` (an empty path means no defaults)."""
    if not path:
        return ()
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise DecodeError("", f"cannot read {path}: {err.strerror or err}") from err
    return parse(text)
