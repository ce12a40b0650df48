"""PyTorch quantize_per_tensor / quantize_per_channel and dequantize as ONNX QuantizeLinear /
DequantizeLinear (variants ``fbgemm`` and ``qnnpack``; the engines share these ATen kernels).

Numeric contracts (torch 2.13.0 x86 build, tests/conformance/test_torch_quant_ops.py):
* quantize: q = clamp(RNE(fma(x, f32(1/scale), zp)), qmin, qmax) -- reciprocal multiply (never a
  division as in ONNX) and the zero point added inside the fused multiply-add, before rounding.
* dequantize: f32(f32(q - zp) * scale).
8-bit targets only (torch's quint8 / qint8; int32 and sub-byte types fall back to the ONNX kernel).
"""
from __future__ import annotations

import numpy as np

from refinterp.quant import torchq
from ..float import quantize as float_quantize
from ..registry import kernel

_ENGINES = ("fbgemm", "qnnpack")


@kernel("QuantizeLinear", _ENGINES, prepare=float_quantize.ql_prepare, raw_inputs=True)
def torch_quantize(plan, x, scale, zp=None):
    dt, lo, hi = plan.target
    if np.dtype(dt).itemsize != 1 or plan.block or np.asarray(x).dtype.kind != "f":
        return float_quantize.quantize_linear(plan, x, scale, zp)
    s = float_quantize.reshape_param(np.asarray(scale, np.float32), x.shape, plan.axis, 0)
    z = 0 if zp is None else float_quantize.reshape_param(np.asarray(zp).astype(np.int64), x.shape, plan.axis, 0)
    return torchq.quantize(x, s, z, lo, hi).astype(dt)


@kernel("DequantizeLinear", _ENGINES, prepare=float_quantize.dql_prepare, raw_inputs=True)
def torch_dequantize(plan, x, scale, zp=None):
    x = np.asarray(x)
    if x.dtype.kind == "f" or x.dtype.itemsize != 1 or plan.block or plan.out is not None:
        return float_quantize.dequantize_linear(plan, x, scale, zp)
    s = float_quantize.reshape_param(np.asarray(scale, np.float32), x.shape, plan.axis, 0)
    z = 0 if zp is None else float_quantize.reshape_param(np.asarray(zp).astype(np.int64), x.shape, plan.axis, 0)
    return torchq.dequantize(x, s, z)
