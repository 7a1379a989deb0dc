"""The fault matrix (docs/reliability.md): crash, EC2 faults, control-plane faults, failover,
drains under pressure, fuzzed input, least privilege."""
