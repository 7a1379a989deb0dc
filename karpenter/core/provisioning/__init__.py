"""Core package: provisioning."""
