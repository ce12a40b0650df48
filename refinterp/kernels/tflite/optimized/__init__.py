"""LiteRT optimized kernels (variant ``tflite_opt``) where they differ from the reference ones."""
from . import activation, elementwise, misc, reduce  # noqa: F401
