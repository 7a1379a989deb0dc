"""ARC zonal shift answered by the test proxy (moto 5.2.1 has no ``arc-zonal-shift``).

GetManagedResource is a REST-JSON call, ``GET /managedresources/<resource arn>``. The proxy
answers it from the shifts a test holds per cluster ARN, in the JSON shape the ARC API
reference documents; an ARN with no entry gets ARC's ``ResourceNotFoundException``, which is
what an unregistered cluster sees.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field

PREFIX = "/managedresources/"


@dataclass(frozen=True)
class Shift:
    """One zonal shift (or, with ``autoshift``, an autoshift) away from a zone id."""

    away_from: str
    expiry: float = 0.0  # epoch seconds; autoshifts have none
    applied: bool = True
    autoshift: bool = False


@dataclass
class Resources:
    """Clusters ARC manages (ARN → their current shifts); shared with the proxy thread."""

    managed: dict[str, list[Shift]] = field(default_factory=dict)


def _shift(arn: str, s: Shift, n: int) -> dict[str, object]:
    return {
        "appliedStatus": "APPLIED" if s.applied else "NOT_APPLIED",
        "zonalShiftId": f"shift-{n}",
        "resourceIdentifier": arn,
        "awayFrom": s.away_from,
        "expiryTime": s.expiry,
        "startTime": s.expiry - 3600,
        "comment": "test",
    }


def answer(path: str, resources: Resources) -> tuple[int, str]:
    """Status and JSON body ARC would give for this GetManagedResource path."""
    arn = urllib.parse.unquote(path[len(PREFIX) :].split("?", 1)[0])
    shifts = resources.managed.get(arn)
    if shifts is None:
        body = {
            "__type": "ResourceNotFoundException",  # how REST-JSON bodies name the error
            "message": f"Resource {arn} is not a managed resource",
        }
        return 404, json.dumps(body)
    doc = {
        "arn": arn,
        "name": arn.rsplit("/", 1)[-1],
        "appliedWeights": {},
        "zonalShifts": [_shift(arn, s, n) for n, s in enumerate(shifts) if not s.autoshift],
        "autoshifts": [
            {
                "appliedStatus": "APPLIED" if s.applied else "NOT_APPLIED",
                "awayFrom": s.away_from,
                "startTime": 0,
            }
            for s in shifts
            if s.autoshift
        ],
        "zonalAutoshiftStatus": "ENABLED",
    }
    return 200, json.dumps(doc)
