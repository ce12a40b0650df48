"""LiteRT / TFLite Micro kernels: reference, optimized, XNNPACK delegate and dynamic-range (hybrid)."""
from . import hybrid, optimized, ref, xnnpack  # noqa: F401
