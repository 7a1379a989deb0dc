"""Repair policies: which unhealthy Node conditions, held how long, justify replacing a node."""

from __future__ import annotations

from karpenter.core.repair import RepairPolicy

__all__ = ["REPAIR_POLICIES", "RepairPolicy"]


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
