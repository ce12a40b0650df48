"""Qualcomm HTP (QNN 2.51 host emulation, ``onnxruntime-qnn==2.7.0``) integer kernels, variants
``htp_v68`` and ``htp_v73`` (arithmetic: refinterp/quant/htp.py, htp_ops.py)."""
from . import activation, avgpool, elementwise, gemm, norm, pool, quantize, select, shape  # noqa: F401
