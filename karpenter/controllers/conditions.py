"""Status condition writes that never drop another writer's condition.

``status.conditions`` is a list, and a JSON merge patch replaces a list whole: a controller that
read the object, changed one condition and patched the list back would erase a condition some
other controller wrote in between (the lifecycle controller dropping a fresh ``Drifted``, say).
Every write here carries the resourceVersion it was computed from (optimistic concurrency); on
a Conflict the object is read again and only this writer's own change is applied to the fresh
list (``replay``), then written again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpenter.kube import codec, errors
from karpenter.kube.client import KubeClient, Obj, Resource

ATTEMPTS = 5
Change = Callable[[list[Obj]], bool]  # edits the list in place; True when it changed it


def replay(before: Sequence[Obj], after: Sequence[Obj], fresh: Sequence[Obj]) -> list[Obj]:
    """``fresh`` with the difference between ``before`` and ``after`` applied, by type.

    Conditions this writer added or changed take their new value; conditions it removed are
    removed; every other condition of ``fresh`` (another writer's) is kept as it is.
    """
    old = {str(c.get("type")): c for c in before}
    new = {str(c.get("type")): c for c in after}
    changed = {t: c for t, c in new.items() if old.get(t) != c}
    removed = set(old) - set(new)
    out = [copy.deepcopy(changed.pop(str(c.get("type")), c)) for c in fresh]
    out = [c for c in out if str(c.get("type")) not in removed]
    out.extend(copy.deepcopy(c) for t, c in sorted(changed.items()))
    return out


async def update(
    kube: KubeClient,
    res: Resource,
    name: str,
    change: Change,
    *,
    raw: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    namespace: str | None = None,
) -> Obj | None:
    """Apply ``change`` to the object's conditions (and set ``status`` fields) with optimistic
    concurrency; the written object, or None when nothing changed or the object is gone.

    ``raw`` is the caller's copy to start from (read afresh when None or on a Conflict).
    """
    for _ in range(ATTEMPTS):
        if raw is None:
            try:
                raw = await kube.get(res, name, namespace)
            except errors.NotFound:
                return None
        conds = codec.conditions(raw)
        current = raw.get("status") or {}
        fields = {k: v for k, v in (status or {}).items() if current.get(k) != v}
        if not change(conds) and not fields:
            return None
        patch = {
            "metadata": {"resourceVersion": codec.meta(raw).get("resourceVersion")},
            "status": {**fields, "conditions": conds},
        }
        try:
            return await kube.merge_patch(res, name, patch, namespace, subresource="status")
        except errors.Conflict:
            raw = None  # another writer got there first: read again, apply our change again
        except errors.NotFound:
            return None
    raise errors.Conflict(409, "Conflict", f"{res.kind} {name}: status kept changing")


def replaying(before: Sequence[Obj], after: Sequence[Obj]) -> Change:
    """A change that re-applies ``before`` → ``after`` to whatever list it is given."""
    snapshot_before = copy.deepcopy(list(before))
    snapshot_after = copy.deepcopy(list(after))

    def apply(conds: list[Obj]) -> bool:
        target = replay(snapshot_before, snapshot_after, conds)
        if target == conds:
            return False
        conds[:] = target
        return True

    return apply
