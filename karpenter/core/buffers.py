"""CapacityBuffers: pre-provisioned headroom as virtual pods, their sizing and their status.

A CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``) names the shape of one chunk (a PodTemplate,
or the pod template of a Deployment / StatefulSet / ReplicaSet through ``scalableRef``) and how
many chunks to keep. The count follows upstream (Karpenter's buffer controller, Cluster
Autoscaler's semantics): ``replicas`` and ``percentage`` (of the scalable workload's replicas,
rounded up, at least 1 when both are positive) combine by taking the larger; ``limits`` caps
that (for each resource both the limits and the chunk request name, ``floor(limit /
request)``; the smallest wins), and with neither ``replicas`` nor ``percentage`` the limits
alone decide.

Each chunk becomes a virtual pod: never created in the cluster, it joins the pending pods of a
provisioning pass, so the solver launches room for it when nothing has room; once the room
exists the virtual pods fit there and nothing more is launched. Real pods then take that room,
and the next pass launches again: headroom is kept, not reserved. Disruption keeps the room
too (``core.disruption.headroom``). Virtual pods carry upstream's annotations, names and
lowest priority, and drop PVC-backed and ephemeral volumes (no claim will ever exist for them).

After each pass the ``Provisioning`` condition says whether the buffer's virtual pods all fit
existing capacity (``FitsExistingCapacity``), needed new NodeClaims or failed
(``RequiresNewCapacity``), or the buffer is not ready / empty; these are upstream's reasons
and messages (``provisioning_condition``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from karpenter.core.model.pod import Pod
from karpenter.core.model.resources import Resources
from karpenter.core.provisioning.results import Results

FAKE_POD_ANNOTATION = "karpenter.sh/capacity-buffer-fake-pod"
NAME_ANNOTATION = "karpenter.sh/capacity-buffer-name"
NAMESPACE_ANNOTATION = "karpenter.sh/capacity-buffer-namespace"
VIRTUAL_POD_PRIORITY = -(2**31)

# The Provisioning condition's reasons (upstream's).
FITS_EXISTING = "FitsExistingCapacity"
REQUIRES_NEW = "RequiresNewCapacity"
NOT_READY = "NotReadyForProvisioning"
EMPTY = "BufferEmpty"


@dataclass(frozen=True, slots=True)
class Buffer:
    """A CapacityBuffer resolved against its pod template (``chunk`` None: not resolved).

    ``scalable_replicas`` is the replica count of the ``scalableRef`` workload (None when the
    buffer names a PodTemplate); ``percentage`` only applies with it.
    """

    namespace: str
    name: str
    chunk: Pod | None
    replicas: int | None = None
    limits: Resources | None = None
    percentage: int | None = None
    scalable_replicas: int | None = None
    uid: str = ""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


def percentage_replicas(scalable: int, percentage: int) -> int:
    """``ceil(scalable × percentage / 100)``, at least 1 when both are positive."""
    count = math.ceil(scalable * percentage / 100)
    return max(count, 1) if scalable > 0 and percentage > 0 else count


def limit_replicas(limits: Resources, chunk: Pod) -> int | None:
    """How many chunks fit ``limits`` (None when no limited resource is requested)."""
    fits = [
        limits[name] // request
        for name, request in sorted(chunk.requests.items())
        if request > 0 and name in limits and name != "pods"
    ]
    return min(fits) if fits else None


def desired_replicas(buffer: Buffer) -> int:
    """How many chunks the buffer keeps (see the module docstring)."""
    sizes = [] if buffer.replicas is None else [buffer.replicas]
    if buffer.percentage is not None and buffer.scalable_replicas:
        sizes.append(percentage_replicas(buffer.scalable_replicas, buffer.percentage))
    capped = (
        limit_replicas(buffer.limits, buffer.chunk)
        if buffer.limits and buffer.chunk is not None
        else None
    )
    if capped is None:
        return max(sizes, default=0)
    return min(max(sizes), capped) if sizes else capped


def is_virtual(pod: Pod) -> bool:
    """Whether ``pod`` is a buffer's virtual pod (it exists only inside a pass)."""
    return pod.annotations.get(FAKE_POD_ANNOTATION) == "true"


def buffer_of(pod: Pod) -> str:
    """``namespace/name`` of the buffer a virtual pod belongs to ("" for a real pod)."""
    if not is_virtual(pod):
        return ""
    notes = pod.annotations
    return f"{notes.get(NAMESPACE_ANNOTATION, '')}/{notes.get(NAME_ANNOTATION, '')}"


def virtual_pods(buffer: Buffer) -> tuple[Pod, ...]:
    """The buffer's chunks as pending pods ``capacity-buffer-<buffer>-<i>`` (i from 1)."""
    if buffer.chunk is None:
        return ()
    annotations = {
        **buffer.chunk.annotations,
        FAKE_POD_ANNOTATION: "true",
        NAME_ANNOTATION: buffer.name,
        NAMESPACE_ANNOTATION: buffer.namespace,
    }
    uid = buffer.uid or f"capacitybuffer/{buffer.key}"
    return tuple(
        replace(
            buffer.chunk,
            namespace=buffer.namespace,
            name=f"capacity-buffer-{buffer.name}-{index}",
            uid=f"{uid}-{index}",
            annotations=annotations,
            node_name="",
            nominated_node_name="",
            phase="Pending",
            priority=VIRTUAL_POD_PRIORITY,
            owners=(),
            pvc_names=(),
            ephemeral_volume_count=0,
            unschedulable_condition=True,
        )
        for index in range(1, desired_replicas(buffer) + 1)
    )


@dataclass(slots=True)
class Placement:
    """Where one buffer's virtual pods went in a pass."""

    existing: int = 0
    new_claims: int = 0
    failed: int = 0
    on: dict[str, int] = field(default_factory=dict)  # existing node → virtual pods placed


def placements(results: Results, virtual: Iterable[Pod]) -> dict[str, Placement]:
    """Per buffer (``namespace/name``), where its virtual pods went in ``results``."""
    out: dict[str, Placement] = {}
    for node, pods in results.existing:
        for pod in pods:
            if key := buffer_of(pod):
                at = out.setdefault(key, Placement())
                at.existing += 1
                at.on[node] = at.on.get(node, 0) + 1
    for claim in results.new_claims:
        for pod in claim.pods:
            if key := buffer_of(pod):
                out.setdefault(key, Placement()).new_claims += 1
    for pod in virtual:
        if pod.key in results.unschedulable and (key := buffer_of(pod)):
            out.setdefault(key, Placement()).failed += 1
    return out


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition to write (type ``Provisioning``)."""

    status: str
    reason: str
    message: str


def provisioning_condition(
    ready: bool, replicas: int | None, placement: Placement | None
) -> Condition | None:
    """The ``Provisioning`` condition after a pass (None: leave it as it is), as upstream."""
    if not ready:
        return Condition("False", NOT_READY, "Buffer is not ReadyForProvisioning")
    if not replicas:
        return Condition("False", EMPTY, "Buffer has zero desired replicas")
    if placement is None:
        return None  # the pass saw none of its virtual pods
    if placement.new_claims or placement.failed:
        return Condition(
            "False",
            REQUIRES_NEW,
            f"{placement.new_claims}/{replicas} virtual pods required new capacity,"
            f" {placement.failed} failed",
        )
    if placement.existing == replicas:
        return Condition(
            "True", FITS_EXISTING, f"All {replicas} virtual pods fit on existing capacity"
        )
    return None
