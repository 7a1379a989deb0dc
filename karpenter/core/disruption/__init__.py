"""Core package: disruption."""
