"""CapacityBuffers (feature gate ``CapacityBuffer``): resolve each buffer, publish its virtual pods.

Every ``interval_s`` (30 s, as upstream requeues) the buffers are listed, each is resolved
against its PodTemplate, and its status written: ``ReadyForProvisioning`` (``Resolved``,
``PodTemplateNotFound``, ``ResolutionFailed``), ``podTemplateRef``, ``podTemplateGeneration``,
``replicas`` and ``provisioningStrategy``. The virtual pods of every resolved buffer
(``core.buffers``) are what the provisioner adds to each pass; when they change,
``on_change`` asks for a pass, and the periodic resync keeps asking so that headroom real pods
took is launched again. ``operator_capacitybuffer_status_condition_count`` counts the buffers
by their ``ReadyForProvisioning`` condition.

Honoured: ``podTemplateRef`` with ``replicas`` and/or ``limits``. Not done: ``scalableRef`` and
``percentage`` (the buffer is reported ``ReadyForProvisioning=False`` saying so), the
``Provisioning`` condition upstream's provisioner writes after each pass, and protecting
headroom nodes from consolidation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from karpenter.api import capacitybuffer as api
from karpenter.api.errors import DecodeError
from karpenter.controllers import conditions
from karpenter.controllers.context import Controller, ControllerContext
from karpenter.core.buffers import Buffer, desired_replicas, virtual_pods
from karpenter.core.model.pod import Pod
from karpenter.kube import codec, errors
from karpenter.kube.client import Obj, Resource

CAPACITYBUFFERS = Resource(
    "autoscaling.x-k8s.io", "v1beta1", "capacitybuffers", "CapacityBuffer", namespaced=True
)
PODTEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", namespaced=True)
READY = "ReadyForProvisioning"
INTERVAL_S = 30.0


class CapacityBuffers(Controller):
    """The resolved buffers and their virtual pods (leader only)."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        interval_s: float = INTERVAL_S,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(ctx, "capacitybuffer")
        self.interval_s = interval_s
        self.on_change = on_change
        self.pods: tuple[Pod, ...] = ()
        self.buffers: dict[str, Buffer] = {}  # namespace/name → resolved buffer
        self._ready: Counter[tuple[str, str, str]] = Counter()  # this round's conditions

    async def run(self) -> None:
        """Resolve forever; each round also asks the provisioner for a pass."""
        while True:
            try:
                await self.reconcile()
            except (errors.ApiError, OSError) as err:
                self._log.warning("capacity buffer pass failed", error=str(err))
            if self.pods and self.on_change is not None:
                self.on_change()
            await self.clock.sleep(self.interval_s)

    async def reconcile(self) -> tuple[Pod, ...]:
        """List and resolve every buffer; the virtual pods of those resolved."""
        items, _ = await self.kube.list(CAPACITYBUFFERS)
        self._ready = Counter()
        resolved: dict[str, Buffer] = {}
        for obj in sorted(items, key=lambda o: (codec.namespace(o), codec.name(o))):
            buffer = await self._resolve(obj)
            if buffer is not None:
                resolved[f"{buffer.namespace}/{buffer.name}"] = buffer
        gauge = self.metrics.operator_capacitybuffer_status_condition_count
        gauge.clear()
        for labels, n in sorted(self._ready.items()):
            gauge.labels(*labels).set(n)
        pods = tuple(p for key in sorted(resolved) for p in virtual_pods(resolved[key]))
        changed = pods != self.pods
        self.buffers, self.pods = resolved, pods
        if changed and self.on_change is not None:
            self.on_change()
        return pods

    async def _resolve(self, obj: Obj) -> Buffer | None:
        ns, name = codec.namespace(obj), codec.name(obj)
        why = api.unsupported(obj)
        if why:
            await self._status(obj, "False", "ResolutionFailed", why, {})
            return None
        template_name = api.template_name(obj)
        try:
            template = await self.kube.get(PODTEMPLATES, template_name, ns)
        except errors.NotFound:
            message = f'podtemplates "{template_name}" not found'
            await self._status(obj, "False", "PodTemplateNotFound", message, {})
            return None
        try:
            buffer = api.buffer(obj, template)
        except DecodeError as err:
            await self._status(obj, "False", "ResolutionFailed", str(err), {})
            return None
        fields = {
            "podTemplateRef": {"name": template_name},
            "podTemplateGeneration": codec.meta(template).get("generation") or 1,
            "replicas": desired_replicas(buffer),
            "provisioningStrategy": (obj.get("spec") or {}).get("provisioningStrategy")
            or api.ACTIVE_CAPACITY,
        }
        await self._status(obj, "True", "Resolved", "Pod template resolved successfully", fields)
        self._log.debug("buffer resolved", buffer=f"{ns}/{name}", replicas=fields["replicas"])
        return buffer

    async def _status(
        self, obj: Obj, status: str, reason: str, message: str, fields: dict[str, object]
    ) -> None:
        self._ready[(READY, status, reason)] += 1
        now = self.clock.now()
        generation = codec.meta(obj).get("generation")

        def change(conds: list[Obj]) -> bool:
            changed = codec.set_condition(conds, READY, status, reason, message, now)
            for cond in conds:
                if cond.get("type") == READY and cond.get("observedGeneration") != generation:
                    cond["observedGeneration"] = generation
                    changed = True
            return changed

        await conditions.update(
            self.kube,
            CAPACITYBUFFERS,
            codec.name(obj),
            change,
            raw=obj,
            status=fields,
            namespace=codec.namespace(obj),
        )
