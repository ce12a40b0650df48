"""Float32 kernels (variant ``float``): the arithmetic every float scheme shares."""
from . import (activation, attention, conv, conv_transpose, deform_conv, detection, dropout,  # noqa: F401
               elementwise, index, matmul, norm, pool, quantize, recurrent, recurrent_state, reduce, resize,
               spectral, svdf, unpool, vision)
from . import conv_onnx_order  # noqa: F401,E402  (after conv: it builds on its plan)
