"""Documented-only backends (Glow, TVM QNN, Vitis DPU): written from their sources, not run here."""
from . import elementwise, gemm  # noqa: F401
