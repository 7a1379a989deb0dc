"""Core package: model."""
