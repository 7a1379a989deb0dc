"""Repair policies: which unhealthy Node conditions, held how long, justify replacing a node."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A Node condition that, held this long, makes the node worth replacing."""

    condition_type: str
    condition_status: str
    toleration_seconds: float


# Upstream's policies: kubelet readiness, and the EKS node-monitoring agent's conditions.
REPAIR_POLICIES = (
    RepairPolicy("Ready", "False", 30 * 60.0),
    RepairPolicy("Ready", "Unknown", 30 * 60.0),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * 60.0),
    RepairPolicy("StorageReady", "False", 30 * 60.0),
    RepairPolicy("NetworkingReady", "False", 30 * 60.0),
    RepairPolicy("KernelReady", "False", 30 * 60.0),
    RepairPolicy("ContainerRuntimeReady", "False", 30 * 60.0),
)
