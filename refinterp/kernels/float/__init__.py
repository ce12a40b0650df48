"""Float32 kernels (variant ``float``): the arithmetic every float scheme shares."""
from . import activation, conv, conv_transpose, elementwise, index, matmul, norm, pool, quantize, reduce, resize, spectral  # noqa: F401
