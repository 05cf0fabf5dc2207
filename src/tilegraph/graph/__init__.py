"""CUDA graphs: capture once, replay with one launch, safely."""

from .capture import Graph, capture, scope
from .runner import GraphRunner
from .train import TrainStep

__all__ = ["Graph", "GraphRunner", "TrainStep", "capture", "scope"]
