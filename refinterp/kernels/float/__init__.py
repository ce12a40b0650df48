"""Float32 kernels (variant ``float``): the arithmetic every float scheme shares."""
from . import (activation, conv, conv_transpose, detection, elementwise, index, matmul, norm, pool,  # noqa: F401
               quantize, recurrent, reduce, resize, spectral, svdf, vision)
