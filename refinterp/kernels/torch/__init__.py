"""PyTorch quantized engines (variants ``fbgemm``, ``qnnpack``)."""
from . import elementwise, gemm, pool, quantize  # noqa: F401
