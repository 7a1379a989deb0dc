"""Instance health from DescribeInstanceStatus: which instances to replace, and how.

Upstream's rules: an instance or system status check that has been ``failed`` (impaired) for at
least 120 seconds means the node is broken, so its NodeClaim is terminated forcefully (no
waiting on a drain that cannot succeed); a scheduled EC2 event (reboot, maintenance, retirement,
stop) means cordon and drain. EBS status is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

IMPAIRED_FOR_SECONDS = 120.0
EVENT_CODES = frozenset(
    {
        "instance-reboot",
        "system-reboot",
        "system-maintenance",
        "instance-retirement",
        "instance-stop",
    }
)
INSTANCE_STATUS = "instance_status"
SYSTEM_STATUS = "system_status"
EVENT_STATUS = "event_status"


@dataclass(frozen=True, slots=True)
class Check:
    """One status check: ``failed`` details and since when (epoch seconds, None if unknown)."""

    failed: bool = False
    impaired_since: float | None = None


@dataclass(frozen=True, slots=True)
class InstanceHealth:
    """One DescribeInstanceStatus entry."""

    instance_id: str
    instance: Check = Check()
    system: Check = Check()
    events: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Unhealthy:
    """An instance to act on: its kind, and whether termination is forceful."""

    instance_id: str
    kind: str

    @property
    def forceful(self) -> bool:
        """Failed status checks terminate without draining; events drain."""
        return self.kind in (INSTANCE_STATUS, SYSTEM_STATUS)


def _impaired(check: Check, now: float) -> bool:
    if not check.failed:
        return False
    return check.impaired_since is None or now - check.impaired_since >= IMPAIRED_FOR_SECONDS


def classify(statuses: list[InstanceHealth], now: float) -> list[Unhealthy]:
    """Unhealthy instances, one entry per instance (first kind wins), sorted by id."""
    found: dict[str, Unhealthy] = {}
    for s in statuses:
        if s.instance_id in found:
            continue
        if _impaired(s.instance, now):
            found[s.instance_id] = Unhealthy(s.instance_id, INSTANCE_STATUS)
        elif _impaired(s.system, now):
            found[s.instance_id] = Unhealthy(s.instance_id, SYSTEM_STATUS)
        elif any(e in EVENT_CODES for e in s.events):
            found[s.instance_id] = Unhealthy(s.instance_id, EVENT_STATUS)
    return [found[k] for k in sorted(found)]
