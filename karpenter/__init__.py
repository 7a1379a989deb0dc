"""Karpenter, the Kubernetes node autoscaler: the package root (nothing is re-exported here)."""
