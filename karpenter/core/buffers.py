"""CapacityBuffers: pre-provisioned headroom as virtual pods added to the provisioning pass.

A CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``) names the shape of one chunk (a PodTemplate)
and how many chunks to keep: ``replicas``, bounded by ``limits`` (for each resource both the
limits and the chunk request name, ``floor(limit / request)``; the smallest wins; with no
``replicas`` the limits alone decide). Each chunk becomes a virtual pod: never created in the
cluster, it joins the pending pods of a pass, so the solver launches room for it when nothing
has room; once the room exists the virtual pods fit there and nothing more is launched. Real
pods then take that room, and the next pass launches again: headroom is kept, not reserved.
Virtual pods carry upstream's annotations so every consumer can tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from karpenter.core.model.pod import Pod
from karpenter.core.model.resources import Resources

FAKE_POD_ANNOTATION = "karpenter.sh/capacity-buffer-fake-pod"
NAME_ANNOTATION = "karpenter.sh/capacity-buffer-name"
NAMESPACE_ANNOTATION = "karpenter.sh/capacity-buffer-namespace"
VIRTUAL_POD_PRIORITY = -(2**31)


@dataclass(frozen=True, slots=True)
class Buffer:
    """A CapacityBuffer resolved against its PodTemplate (``chunk`` None: not resolved)."""

    namespace: str
    name: str
    chunk: Pod | None
    replicas: int | None = None
    limits: Resources | None = None


def desired_replicas(buffer: Buffer) -> int:
    """How many chunks the buffer keeps (Cluster Autoscaler's semantics, as upstream)."""
    desired = buffer.replicas
    if buffer.limits and buffer.chunk is not None:
        fits = [
            buffer.limits[name] // request
            for name, request in sorted(buffer.chunk.requests.items())
            if request > 0 and name in buffer.limits and name != "pods"
        ]
        if fits:
            return min(fits) if desired is None else min(desired, *fits)
    return desired or 0


def is_virtual(pod: Pod) -> bool:
    """Whether ``pod`` is a buffer's virtual pod (it exists only inside a pass)."""
    return pod.annotations.get(FAKE_POD_ANNOTATION) == "true"


def virtual_pods(buffer: Buffer) -> tuple[Pod, ...]:
    """The buffer's chunks as pending pods, named ``<buffer>-<index>`` in its namespace."""
    if buffer.chunk is None:
        return ()
    annotations = {
        **buffer.chunk.annotations,
        FAKE_POD_ANNOTATION: "true",
        NAME_ANNOTATION: buffer.name,
        NAMESPACE_ANNOTATION: buffer.namespace,
    }
    return tuple(
        replace(
            buffer.chunk,
            namespace=buffer.namespace,
            name=f"capacitybuffer-{buffer.name}-{index}",
            uid=f"capacitybuffer/{buffer.namespace}/{buffer.name}/{index}",
            annotations=annotations,
            node_name="",
            phase="Pending",
            priority=VIRTUAL_POD_PRIORITY,
            owners=(),
        )
        for index in range(desired_replicas(buffer))
    )
