"""The apiserver audit log as the experiments' observer: who wrote what, and when.

The fault control plane logs every request at Metadata level (NodeClaim creations with their
response body, so the NodePool of each launch is known), except the test's own admin user and
the control plane's components. The apiserver runs in blocking mode: an event is on disk before
its request is answered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["admin", "system:kube-scheduler", "system:kube-controller-manager", "system:apiserver"]
  - level: None
    userGroups: ["system:nodes"]
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
  - level: RequestResponse
    verbs: ["create"]
    resources: [{group: "karpenter.sh", resources: ["nodeclaims"]}]
  - level: Metadata
"""

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class Entry:
    """One audited request."""

    user: str
    verb: str
    group: str
    resource: str  # with "/subresource" when there is one
    namespace: str
    name: str
    code: int
    at: float  # requestReceivedTimestamp, unix seconds
    user_agent: str
    body: dict[str, Any]  # the response object (NodeClaim creations only)
    forbidden: bool = False  # RBAC said no (not e.g. admission refusing a terminating namespace)


def _entry(doc: dict[str, Any]) -> Entry | None:
    ref = doc.get("objectRef")
    if not ref:
        return None
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    stamp = doc.get("requestReceivedTimestamp", "1970-01-01T00:00:00Z")
    at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return Entry(
        user=doc.get("user", {}).get("username", ""),
        verb=doc.get("verb", ""),
        group=ref.get("apiGroup", ""),
        resource=resource,
        namespace=ref.get("namespace", ""),
        name=ref.get("name", "")
        or (doc.get("responseObject") or {}).get("metadata", {}).get("name", ""),
        code=int((doc.get("responseStatus") or {}).get("code", 0)),
        at=at,
        user_agent=doc.get("userAgent", ""),
        body=doc.get("responseObject") or {},
        forbidden=(doc.get("annotations") or {}).get("authorization.k8s.io/decision") == "forbid",
    )


def read(path: Path, *, since: float = 0.0, user: str = "") -> list[Entry]:
    """Audited requests (ResponseComplete), optionally only from ``since`` and by ``user``."""
    out: list[Entry] = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if doc.get("stage") != "ResponseComplete":
            continue
        entry = _entry(doc)
        if entry is None or entry.at < since or (user and entry.user != user):
            continue
        out.append(entry)
    return out


def nodeclaim_creations(entries: list[Entry]) -> list[Entry]:
    """Successful NodeClaim creations."""
    return [
        e for e in entries if e.verb == "create" and e.resource == "nodeclaims" and e.code == 201
    ]


def pool_of(entry: Entry) -> str:
    labels = (entry.body.get("metadata") or {}).get("labels") or {}
    return str(labels.get("karpenter.sh/nodepool", ""))
