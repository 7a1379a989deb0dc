"""In-flight subnet IPs: launches use addresses before DescribeSubnets shows it.

Each launch takes about one IP per pod slot (VPC CNI secondary IPs) plus the node's own, so a
burst of launches would all pick the subnet that looked emptiest. The tracker subtracts what
this process launched from each subnet's reported free IPs until EC2's count changes (then the
report includes them and the tally starts over).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from karpenter.providers.aws.core.nodeclass import Subnet


@dataclass(slots=True)
class InflightIPs:
    """IPs used by our launches per subnet since its free count was last reported."""

    _used: dict[str, int] = field(default_factory=dict)
    _reported: dict[str, int] = field(default_factory=dict)

    def adjust(self, subnets: Iterable[Subnet]) -> list[Subnet]:
        """The subnets with their free IPs less what we launched into them."""
        out = []
        for s in subnets:
            if self._reported.get(s.id) != s.available_ips:
                self._reported[s.id] = s.available_ips
                self._used.pop(s.id, None)  # a fresh report already counts our launches
            used = self._used.get(s.id, 0)
            out.append(replace(s, available_ips=max(s.available_ips - used, 0)))
        return out

    def consume(self, subnet_id: str, ips: int) -> None:
        """Record a launch into a subnet."""
        self._used[subnet_id] = self._used.get(subnet_id, 0) + ips
