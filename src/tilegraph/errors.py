"""Exceptions raised by tilegraph. Nothing fails silently: each message says what to do."""


class CaptureError(RuntimeError):
    """Work that cannot be recorded into a CUDA graph was attempted during capture."""


class StaleOutputError(RuntimeError):
    """A graph output was read after a later replay overwrote it."""


class SideEffectWarning(RuntimeWarning):
    """Building a graph ran a function that advanced state it keeps outside its inputs and
    outputs (tg.capture's restore_state says what to do about it)."""


class CollectiveError(RuntimeError):
    """A collective of a tensor-parallel model failed or did not finish in time: another
    rank failed, stopped or hangs. The message names this rank and the step."""
