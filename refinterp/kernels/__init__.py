"""Kernels, grouped by the backend whose arithmetic they reproduce (map: kernels/README.md).

Importing this package registers every kernel: each backend folder imports its op-family modules.
"""
from . import documented, float, int, onnxruntime, qnn_htp, signal, tflite, torch  # noqa: F401,A004
