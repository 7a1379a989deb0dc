"""Decoding errors that name the field at fault (``spec.containers[0].resources...``)."""

from __future__ import annotations


class DecodeError(ValueError):
    """An object does not decode; ``path`` is the dotted field path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message
