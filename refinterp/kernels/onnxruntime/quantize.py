"""DynamicQuantizeLinear (uint8) as ONNX Runtime (``ort``) and onnx.reference / the spec
(``onnx_ref``, ``float``) compute it.

Numeric contract (float32 throughout):
    lo = min(0, min(x)), hi = max(0, max(x))
    scale = f32((hi - lo) / 255); when hi == lo: ORT 1.0 (qmath.h GetQuantizationParameter),
            onnx.reference f32(1.0 / 255)
    zp = RNE(clamp(f32(0 - lo / scale), 0, 255))           (clamp first, then round half even)
    y = clamp(RNE(f32(x / scale)) + zp, 0, 255)            (MlasQuantizeLinear / reference)
"""
from __future__ import annotations

import numpy as np

from refinterp.quant import mlas
from ..registry import kernel


def _run(x, degenerate_scale):
    scale, zp = mlas.quantization_parameter(x, 0, 255, degenerate_scale)
    y = mlas.quantize_linear(x, scale, zp, 0, 255).astype(np.uint8)
    return y, np.asarray(scale, np.float32), np.asarray(zp, np.uint8)


@kernel("DynamicQuantizeLinear", "ort", raw_inputs=True)
def dql_ort(plan, x):
    return _run(x, np.float32(1.0))


@kernel("DynamicQuantizeLinear", ("onnx_ref", "float"), raw_inputs=True)
def dql_onnx_ref(plan, x):
    return _run(x, np.float32(np.float32(1.0) / np.float32(255)))
