"""NodePool status: validation and readiness conditions, and the node/resource counters.

Upstream splits this over ``nodepool.validation``, ``nodepool.readiness`` and
``nodepool.counter``; here one small controller writes all of it in one status patch:

* ``ValidationSucceeded``: the CRD's OpenAPI/CEL rules already ran at admission; this adds the
  runtime rules of ``karpenter.api.nodepool`` (the same model ``simulate`` validates with). A
  pool failing them is skipped by the provisioner and says why here.
* ``NodeClassReady``: the simulated cloud has no NodeClass objects, so it is always True.
* ``Ready``: both of the above.
* ``status.resources``: the summed capacity of the pool's Nodes plus ``nodes``, their count,
  with upstream's zero entries for cpu, memory, pods and ephemeral-storage, as Kubernetes
  quantities (``16Gi``, ``3500m``): the NODES, CPU and MEMORY columns of ``kubectl get
  nodepools`` read ``.status.resources.{nodes,cpu,memory}`` as upstream's CRD does.
  ``status.nodes`` carries the count as an integer too.
"""

from __future__ import annotations

import anyio
import anyio.abc

from karpenter.aio.keyed_queue import KeyedQueue
from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.model import labels as lbl
from karpenter.core.model import resources as res
from karpenter.core.model.quantity import MILLI, format_quantity
from karpenter.kube import codec
from karpenter.kube.client import NODEPOOLS, Obj

# upstream's BaseResources: always present, zero when the pool has no nodes
BASE = {res.CPU: 0, res.MEMORY: 0, res.PODS: 0, res.EPHEMERAL_STORAGE: 0, res.NODES: 0}


class NodePoolStatus(Controller):
    """Keeps every NodePool's status conditions and counters current."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, "nodepool.status")
        self.queue: KeyedQueue[str] = KeyedQueue(self.clock, "nodepool.status")
        self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, key: str, obj: Obj | None) -> None:
        if kind == "NodePool" and obj is not None:
            self.queue.add(key)
        elif kind == "Node":
            pool = ((obj or {}).get("metadata", {}).get("labels") or {}).get(lbl.NODEPOOL)
            if pool:
                self.queue.add(pool)
            elif obj is None:  # a deleted Node: we no longer know its pool, recount all
                for name in list(self.state.nodepools.entries):
                    self.queue.add(name)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Reconcile NodePools forever."""
        for name in list(self.state.nodepools.entries):
            self.queue.add(name)
        task_status.started()
        await self.queue.run(self.reconcile, 4)

    async def reconcile(self, name: str) -> float | None:
        """Compute and write one NodePool's status (only when it changed)."""
        raw = self.state.nodepools.raw(name)
        if raw is None or codec.meta(raw).get("deletionTimestamp"):
            return None
        now = self.clock.now()
        conds = codec.conditions(raw)
        problem = self.state.nodepools.invalid.get(name, "")
        if problem:
            codec.set_condition(
                conds, "ValidationSucceeded", "False", "NodePoolValidationFailed", problem, now
            )
        else:
            codec.set_condition(conds, "ValidationSucceeded", "True", "", "", now)
        codec.set_condition(conds, "NodeClassReady", "True", "", "", now)
        ready = "False" if problem else "True"
        codec.set_condition(conds, "Ready", ready, "NotReady" if problem else "Ready", problem, now)
        nodes, capacity = self._count(name)
        # Only this controller's own condition changes are replayed on a Conflict, so a
        # NodeRegistrationHealthy written meanwhile is kept.
        change = conditions.replaying(codec.conditions(raw), conds)
        fields = {"nodes": nodes, "resources": capacity}
        obj = await conditions.update(self.kube, NODEPOOLS, name, change, raw=raw, status=fields)
        if obj is not None:
            self.state.nodepools.upsert(obj)
        return None

    def _count(self, pool: str) -> tuple[int, dict[str, str]]:
        total: dict[str, int] = dict(BASE)
        count = 0
        for node in self.state.nodes.values():
            if node.labels.get(lbl.NODEPOOL) != pool:
                continue
            count += 1
            total = res.add(total, node.capacity)
        total[res.NODES] = count * MILLI
        return count, {k: format_quantity(v, k) for k, v in sorted(total.items())}
