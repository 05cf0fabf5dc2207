"""Measurement: timing, device ceilings, side-by-side comparison, profiling, reports."""

from .compare import Comparison, Unavailable, VariantResult, compare
from .profile import Profile, nvtx, profile
from .roofline import ceilings
from .timing import Stats, measure

__all__ = ["Comparison", "Profile", "Stats", "Unavailable", "VariantResult", "ceilings",
           "compare", "measure", "nvtx", "profile"]
