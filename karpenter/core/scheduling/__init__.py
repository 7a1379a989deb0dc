"""Core package: scheduling."""
