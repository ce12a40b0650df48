"""LiteRT XNNPACK delegate (variant ``xnn``)."""
from . import elementwise, gemm  # noqa: F401
