"""Measurement: timing with CUDA events and graph replays, device ceilings."""

from .roofline import ceilings
from .timing import Stats, measure

__all__ = ["Stats", "ceilings", "measure"]
