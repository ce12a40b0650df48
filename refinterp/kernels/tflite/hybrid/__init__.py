"""LiteRT dynamic-range (hybrid) kernels: float activations, int8 weights."""
from . import conv, lstm, matmul, xnnpack  # noqa: F401
