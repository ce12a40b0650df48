"""Float32 kernels (variant ``float``): the arithmetic every float scheme shares."""
from . import (activation, attention, conv, conv_transpose, detection, dropout, elementwise, index, matmul,  # noqa: F401
               norm, pool, quantize, recurrent, reduce, resize, spectral, svdf, vision)
