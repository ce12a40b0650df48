"""Which nodes to run at higher precision: per-node float fallback ranked by the final-output gain
against a float reference, greedy selection under a budget, the result written as a scheme."""
from .engine import Sensitivity, analyse
from .metrics import METRICS

__all__ = ["Sensitivity", "analyse", "METRICS"]
