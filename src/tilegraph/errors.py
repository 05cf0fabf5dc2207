"""Exceptions raised by tilegraph. Nothing fails silently: each message says what to do."""


class CaptureError(RuntimeError):
    """Work that cannot be recorded into a CUDA graph was attempted during capture."""


class StaleOutputError(RuntimeError):
    """A graph output was read after a later replay overwrote it."""
