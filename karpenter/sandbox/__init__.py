"""Sandboxes: real Kubernetes components run locally so tests exercise genuine API behaviour."""
