"""Compact copies of raw API objects, for caches that hold them for the controller's life.

``json.loads`` makes fresh strings for every object it decodes, so each watch event's pod
brings its own ``"metadata"``, ``"kubernetes.io/hostname"``, ``"True"``, ``"ReplicaSet"``...
Measured in a 500-node, 1000-pod cluster (hostname-spread scale-out): the mirror held 34 MB of
raw objects, 17 MB of it the same few thousand strings repeated, and the Nodes and NodeClaims
this process had written kept the ``metadata.managedFields`` of the write's response (the
informer drops them from what it lists and watches, as upstream's cache does; a write's
response carries them too). ``compact`` returns a copy without ``managedFields`` whose keys and
short string values are interned (shared by every object holding them). Long strings (a pod's
unschedulable message, a certificate) are mostly unique and are kept as they are.
"""

from __future__ import annotations

import sys
from typing import Any

Obj = dict[str, Any]

# Names, label keys and values, enum-like values, UIDs (36), timestamps (20): all shorter.
_SHORT = 64


def strip_managed_fields(obj: Obj) -> None:
    """Drop ``metadata.managedFields`` (server-side-apply bookkeeping nothing here reads;
    about half of a pod's JSON) in place."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


def compact(obj: Obj) -> Obj:
    """A copy of ``obj`` without managedFields, its repeated strings shared."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        # left out before the copy, so it is never copied (the caller's object stays whole)
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    out: Obj = _copy(obj)
    return out


def _copy(value: Any) -> Any:
    # Exact type checks: the decoded JSON holds only dict, list, str, int, float, bool, None.
    kind = type(value)
    if kind is str:
        return sys.intern(value) if len(value) <= _SHORT else value
    if kind is dict:
        return {sys.intern(k): _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value
