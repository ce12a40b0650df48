"""ONNX Runtime CPU (MLAS) kernels (variant ``ort``), integer and the float ops whose MLAS order matters."""
from . import (attention, contrib, elementwise, embed, float_activation, float_conv, float_matmul, float_softmax,  # noqa: F401
               gemm, matmul_nbits, pool, qlinear_runtime, quantize, unpool)
