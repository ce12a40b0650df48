"""Float32 kernels (variant ``float``): the arithmetic every float scheme shares."""
from . import (activation, conv, conv_transpose, detection, dropout, elementwise, index, matmul, norm,  # noqa: F401
               pool, quantize, recurrent, reduce, resize, spectral, svdf, vision)
