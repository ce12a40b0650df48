"""LiteRT reference kernels (variant ``tflite_ref``; TFLite Micro shares them)."""
from . import (activation, conv, div, elementwise, lstm, matmul, misc, pool, reduce, rescale_unary,  # noqa: F401
               softmax, svdf)
