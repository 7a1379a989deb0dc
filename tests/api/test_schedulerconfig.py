"""SCHEDULER_CONFIG documents: strict decoding with the field at fault named."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter.api import schedulerconfig
from karpenter.api.errors import DecodeError
from karpenter.core.model.pod import TopologySpread

GOOD = """
podTopologySpread:
  defaultConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
  - maxSkew: 3
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: DoNotSchedule
    minDomains: 2
    nodeTaintsPolicy: Honor
"""


def test_parses_yaml_and_json() -> None:
    """Both documents give the constraints in order, with upstream's policy defaults."""
    got = schedulerconfig.parse(GOOD)
    assert got == (
        TopologySpread("topology.kubernetes.io/zone", 1, "ScheduleAnyway"),
        TopologySpread("kubernetes.io/hostname", 3, "DoNotSchedule", None, 2, "Honor", "Honor"),
    )
    as_json = (
        '{"podTopologySpread": {"defaultConstraints": [{"maxSkew": 1, '
        '"topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}'
    )
    assert schedulerconfig.parse(as_json) == got[:1]


def test_empty_documents_mean_no_defaults() -> None:
    """An empty file, or no constraints, configures nothing."""
    assert schedulerconfig.parse("") == ()
    assert schedulerconfig.parse("podTopologySpread: {}") == ()
    assert schedulerconfig.load("") == ()


_C = "podTopologySpread.defaultConstraints[0]"


@pytest.mark.parametrize(
    ("constraint", "path", "message"),
    [
        (
            "{maxSkew: 0, topologyKey: a, whenUnsatisfiable: DoNotSchedule}",
            f"{_C}.maxSkew",
            "positive integer",
        ),
        ("{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}", f"{_C}.topologyKey", "required"),
        (
            "{maxSkew: 1, topologyKey: 'bad key!', whenUnsatisfiable: DoNotSchedule}",
            f"{_C}.topologyKey",
            "invalid key",
        ),
        ("{maxSkew: 1, topologyKey: a}", f"{_C}.whenUnsatisfiable", "invalid value None"),
        (
            "{maxSkew: 1, topologyKey: a, whenUnsatisfiable: Maybe}",
            f"{_C}.whenUnsatisfiable",
            "'Maybe'",
        ),
        (
            "{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}",
            f"{_C}.labelSelector",
            "deduced per pod",
        ),
        (
            "{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [x]}",
            f"{_C}.matchLabelKeys",
            "not allowed",
        ),
        (
            "{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, maxskew: 2}",
            f"{_C}.maxskew",
            "unknown field",
        ),
        (
            "{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, minDomains: 0}",
            f"{_C}.minDomains",
            "positive integer",
        ),
        (
            "{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, nodeAffinityPolicy: x}",
            f"{_C}.nodeAffinityPolicy",
            "Honor or Ignore",
        ),
    ],
)
def test_bad_constraints_name_the_field(constraint: str, path: str, message: str) -> None:
    """Each invalid constraint is refused with its field path and the reason."""
    with pytest.raises(DecodeError) as err:
        schedulerconfig.parse(f"podTopologySpread: {{defaultConstraints: [{constraint}]}}")
    assert err.value.path == path
    assert message in err.value.message


def test_duplicate_pairs_are_refused() -> None:
    """One (topologyKey, whenUnsatisfiable) pair may appear once."""
    one = "{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule}"
    with pytest.raises(DecodeError, match=r"defaultConstraints\[1\]: duplicate topologyKey 'a'"):
        schedulerconfig.parse(f"podTopologySpread: {{defaultConstraints: [{one}, {one}]}}")


def test_unknown_top_level_and_garbage() -> None:
    """A kube-scheduler profile layout or non-YAML is refused, not ignored."""
    with pytest.raises(DecodeError, match=r"^profiles: unknown field"):
        schedulerconfig.parse("profiles: []")
    with pytest.raises(DecodeError, match="not YAML or JSON"):
        schedulerconfig.parse("podTopologySpread: [unclosed")
    with pytest.raises(DecodeError, match="must be a list"):
        schedulerconfig.parse("podTopologySpread: {defaultConstraints: 3}")


def test_load_reads_the_file_and_reports_a_missing_one(tmp_path: Path) -> None:
    """``load`` parses a file; a missing file names its path."""
    path = tmp_path / "config.yaml"
    path.write_text(GOOD)
    assert len(schedulerconfig.load(str(path))) == 2
    with pytest.raises(DecodeError, match=r"cannot read .*nope\.yaml"):
        schedulerconfig.load(str(tmp_path / "nope.yaml"))
