"""LiteRT reference kernels (variant ``tflite_ref``; TFLite Micro shares them)."""
from . import activation, conv, elementwise, lstm, matmul, misc, pool, reduce, rescale_unary, softmax, svdf  # noqa: F401
